#pragma once
// Forking a child that belongs to this process's parent: clone(CLONE_PARENT).
//
// The warm template forks the workers this way, so that each worker is the caller's own
// child, exactly like an exec'd one: the caller reaps it and reads its exit status, and
// the caller's death kills it (PR_SET_PDEATHSIG) whether or not the template still lives.
//
// glibc offers no fork with CLONE_PARENT, so the clone is raw. A raw clone leaves glibc's
// thread descriptor holding the old thread id (raise, abort, mutex owners and
// pthread_setaffinity_np read it), so the kernel is asked to write the child's id into
// that field, as glibc's own fork does. Where the field is, is found by a probe at
// start-up (prepare_fork_for_parent) rather than assumed from one glibc's layout.
#include <sys/types.h>

#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Whether fork_for_parent can be used.
enum class ForkReadiness {
    ready,
    try_later,  ///< the probe could not run now (out of processes, fds or memory)
    never,      ///< glibc's thread-id field cannot be told apart in this process
};

/// Finds glibc's thread-id field with a probe (one ordinary fork). Call while the process
/// has a single thread. Anything but ready fills in `why_not`, and then fork_for_parent
/// must not be used.
ForkReadiness prepare_fork_for_parent(std::string& why_not);

/// Like fork(), but the child's parent is this process's parent. Only for a process with
/// a single thread, after prepare_fork_for_parent succeeded. Fork handlers
/// (pthread_atfork) do not run: with one thread there is no lock or pool to repair.
/// Returns the child's pid in the parent (-1 with errno on failure) and 0 in the child.
pid_t fork_for_parent();

/// Number of threads of this process (from /proc/self/task), or -1 if unreadable.
int thread_count();

MPIFY_END_DETAIL_NAMESPACE
