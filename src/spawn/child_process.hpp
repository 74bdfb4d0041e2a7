#pragma once
// A worker process as the caller sees it: what it is started with (LaunchSpec, whichever
// spawner starts it) and the handle on it once it runs (ChildProcess).
#include "common/clock.hpp"
#include "common/unique_fd.hpp"

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// What a new worker (or warm template, or launcher of remote workers) process is started
/// with; the fds become its fds 0-4 as contract/process_contract.hpp lays out.
struct LaunchSpec {
    std::string executable;          ///< path passed to execve
    std::vector<std::string> argv;   ///< argv[0] included
    std::vector<std::string> env;    ///< "NAME=value" entries, the whole environment
    int stdin_fd = -1;               ///< becomes the child's fd 0 (-1: /dev/null)
    int stdout_fd = -1;              ///< becomes the child's fd 1 (-1: inherit the caller's)
    int stderr_fd = -1;              ///< becomes the child's fd 2 (-1: inherit the caller's)
    int channel_fd = -1;             ///< becomes the child's fd 3
    int args_fd = -1;                ///< becomes the child's fd 4 (-1: none)
    /// PR_SET_PDEATHSIG: SIGKILL when the thread that launched it ends. Off for the warm
    /// template, which lives across calls and ends when its control socket closes.
    bool die_with_caller_thread = true;
    /// Lead a new process group (a launcher: what it starts is stopped with it).
    bool own_process_group = false;
    /// When the call gives up (its timeout): a warm template's answer is awaited until
    /// then at most. None: no timeout.
    std::optional<Clock::time_point> deadline;
};

/// A running child of this process.
struct ChildProcess {
    pid_t pid = -1;
    UniqueFd pidfd;  ///< readable once the child has exited
};

/// Takes charge of a child of this process that is already running: opens its pidfd.
/// Throws SpawnError (after killing and reaping the child) if that fails.
ChildProcess adopt_child(pid_t pid);

MPIFY_END_DETAIL_NAMESPACE
