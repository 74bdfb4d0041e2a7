#pragma once
// Starting one worker process: fork + exec, with the child's fds laid out as mpify
// needs them and bound to die with the thread that started it.
#include "unique_fd.hpp"

#include <sys/types.h>

#include <string>
#include <vector>

namespace mpify::detail {

struct LaunchSpec {
    std::string executable;          ///< path passed to execve
    std::vector<std::string> argv;   ///< argv[0] included
    std::vector<std::string> env;    ///< "NAME=value" entries, the whole environment
    int stdout_fd = -1;              ///< becomes the child's fd 1 (-1: inherit the caller's)
    int stderr_fd = -1;              ///< becomes the child's fd 2 (-1: inherit the caller's)
    int channel_fd = -1;             ///< becomes the child's fd 3
};

struct ChildProcess {
    pid_t pid = -1;
    UniqueFd pidfd;  ///< readable once the child has exited
};

/// Starts the child. Its stdin is /dev/null, fds 1-3 are as given, every other fd is
/// closed at exec, its signal mask is cleared and it gets SIGKILL if the calling thread
/// dies (PR_SET_PDEATHSIG). Returns once exec has succeeded; throws SpawnError (naming
/// the executable and errno) if it did not.
ChildProcess launch(const LaunchSpec& spec);

/// "SIGSEGV (Segmentation fault)".
std::string signal_description(int signal);

}  // namespace mpify::detail
