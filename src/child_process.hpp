#pragma once
// Starting one worker process: fork + exec, with the child's fds laid out as mpify
// needs them and bound to die with the thread that started it.
#include "unique_fd.hpp"

#include <sys/types.h>

#include <string>
#include <vector>

namespace mpify::detail {

/// A worker's fds: 0 stdin, 1 stdout, 2 stderr, 3 its channel, 4 its arguments in
/// shared memory (when they are large): see channel.hpp.
constexpr int worker_fd_count = 5;

struct LaunchSpec {
    std::string executable;          ///< path passed to execve
    std::vector<std::string> argv;   ///< argv[0] included
    std::vector<std::string> env;    ///< "NAME=value" entries, the whole environment
    int stdout_fd = -1;              ///< becomes the child's fd 1 (-1: inherit the caller's)
    int stderr_fd = -1;              ///< becomes the child's fd 2 (-1: inherit the caller's)
    int channel_fd = -1;             ///< becomes the child's fd 3
    int args_fd = -1;                ///< becomes the child's fd 4 (-1: none)
    /// PR_SET_PDEATHSIG: SIGKILL when the thread that launched it ends. Off for the warm
    /// template, which lives across calls and ends when its control socket closes.
    bool die_with_caller_thread = true;
};

struct ChildProcess {
    pid_t pid = -1;
    UniqueFd pidfd;  ///< readable once the child has exited
};

/// Starts the child. Its stdin is /dev/null, fds 1-4 are as given, every other fd is
/// closed at exec, its signal mask is cleared and (unless told otherwise) it gets
/// SIGKILL if the calling thread dies (PR_SET_PDEATHSIG). Returns once exec has succeeded; throws SpawnError (naming
/// the executable and errno) if it did not.
ChildProcess launch(const LaunchSpec& spec);

/// Takes charge of a child of this process that is already running: opens its pidfd.
/// Throws SpawnError (after killing and reaping the child) if that fails.
ChildProcess watch_child(pid_t pid);

/// Sends SIGKILL to a child of this process and waits until it is reaped.
void kill_and_reap(pid_t pid) noexcept;

/// In a child between fork and exec (async-signal-safe): makes fd i a copy of sources[i]
/// (-1: fds 1 and 2 stay as they are, 3 and 4 are closed), then closes every fd above 4,
/// now or at exec. Returns 0, or the errno of what failed.
int place_worker_fds(const int (&sources)[worker_fd_count], bool close_others_now) noexcept;

/// "SIGSEGV (Segmentation fault)".
std::string signal_description(int signal);

}  // namespace mpify::detail
