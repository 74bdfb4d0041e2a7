#pragma once
// A short query to another program (Slurm's squeue, say) and what it printed: run by
// /bin/sh, its stdout and stderr together, within a time limit. The program leads its own
// process group, so a query that hangs is stopped with whatever it started.
#include "spawn/child_process.hpp"

#include <signal.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct CommandOutput {
    bool succeeded = false;  ///< it exited with status 0 within the time
    std::string how;         ///< otherwise: "exit code 1", "killed by SIGSEGV", "no answer within 10 s"...
    std::string output;      ///< what it printed (the first 64 KiB)
};

/// How /bin/sh is started to run `command` in its own process group (so that it is
/// stopped with whatever it starts), its stdout and stderr both to `output_fd`; stdin is
/// /dev/null unless the caller sets `stdin_fd`.
LaunchSpec shell_command(const std::string& command, int output_fd);

/// How a reaped child ended, from its waitid status: "exit code 1", "killed by SIGSEGV ...".
std::string how_it_ended(const siginfo_t& end);

/// Runs `command` with /bin/sh, stdin from /dev/null; stops it (and its process group)
/// once `limit` has passed. Throws SpawnError when it cannot start.
CommandOutput command_output(const std::string& command, std::chrono::milliseconds limit);

/// Runs every program of `programs` at once, each leading its own process group, with
/// its stdout and stderr together into a pipe of its own (their fds in the specs are
/// replaced); what each printed (its first `kept_bytes`), once all have ended or `limit`
/// has passed (those still running then are killed, with what they started). Throws
/// SpawnError, after stopping the ones it started, when one cannot start.
std::vector<CommandOutput> programs_output(std::vector<LaunchSpec> programs, std::chrono::milliseconds limit,
                                           std::size_t kept_bytes);

MPIFY_END_DETAIL_NAMESPACE
