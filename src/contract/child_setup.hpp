#pragma once
// The one function every spawner runs in a new worker process before it becomes the
// worker: the exec spawner between fork and exec, the warm template in each child it forks.
#include "contract/process_contract.hpp"

#include <sys/types.h>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// How the new process is set up.
struct ChildSetup {
    /// sources[i] becomes fd i (-1: fds 1 and 2 stay as they are, 3 and 4 are closed).
    int sources[worker_fd_count] = {-1, -1, -1, -1, -1};
    /// Ask for SIGKILL when the parent dies (PR_SET_PDEATHSIG), and give up if the parent
    /// is no longer `parent` (it died before the request took effect).
    bool die_with_parent = true;
    pid_t parent = 0;
    /// Close every other fd now (a forked template has no exec to close them), or mark
    /// them close-on-exec (the exec spawner keeps its error pipe usable until exec).
    bool close_others_now = false;
    /// Lead a new process group (a launcher: what it starts is stopped with it).
    bool own_process_group = false;
};

/// Lays out the fds, binds the process to its parent and clears the signal mask.
/// Async-signal-safe: it runs in a copy of a possibly multithreaded process. Returns 0,
/// or the errno of what failed (ESRCH: the parent is already gone).
int set_up_worker_child(const ChildSetup& setup) noexcept;

MPIFY_END_DETAIL_NAMESPACE
