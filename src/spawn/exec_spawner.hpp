#pragma once
// The exec spawner: a worker (or a warm template, a launcher) as a new program image:
// a child that borrows the caller's memory until it execs (a fork under sanitizers).
#include "spawn/child_process.hpp"

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Starts the child: fds 0-4 are as `spec` gives them (stdin /dev/null unless given),
/// every other fd is closed at exec, its signal mask is cleared and (unless told
/// otherwise) it gets SIGKILL when the calling thread dies. Returns once exec has succeeded; throws
/// SpawnError (naming the executable and errno) if it did not.
ChildProcess spawn_by_exec(const LaunchSpec& spec);

MPIFY_END_DETAIL_NAMESPACE
