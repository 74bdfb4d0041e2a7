#pragma once
// A launcher on the caller's side: /bin/sh running a placement's command (srun, mpirun,
// ssh, a template of the user's), the last of its output kept for the error that names it.
#include "common/unique_fd.hpp"
#include "spawn/child_process.hpp"

#include <signal.h>

#include <chrono>
#include <memory>
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct LauncherProcess {
    std::string command;  // what /bin/sh runs: in errors and the debug log
    ChildProcess process;
    UniqueFd output;      // its stdout and stderr, non-blocking
    std::string tail;     // the last of what it wrote
    bool reaped = false;
    siginfo_t end{};

    /// Takes what its output holds now, keeping the tail.
    void read_output();
    /// Whether it has ended (it may not be reaped yet).
    bool ended() const;
    /// Reaps it once it has ended (ended() is true), with its last output.
    void reap();
    /// Gives it `farewell` to end, then stops it and what it started (its process group:
    /// SIGTERM, and SIGKILL after a grace), and reaps it.
    void stop(std::chrono::milliseconds farewell) noexcept;
};

/// Starts `command` with /bin/sh, `stdin_fd` as its stdin, leading its own process group.
/// Throws SpawnError.
std::unique_ptr<LauncherProcess> start_launcher(const std::string& command, int stdin_fd);

MPIFY_END_DETAIL_NAMESPACE
