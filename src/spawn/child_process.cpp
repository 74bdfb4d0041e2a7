#include "spawn/child_process.hpp"

#include "common/posix.hpp"

#include <mpify/error.hpp>

#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE

ChildProcess adopt_child(pid_t pid) {
    ChildProcess child;
    child.pid = pid;
    child.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!child.pidfd) {
        const int e = errno;
        kill_and_reap(pid);
        throw SpawnError(fmt::format("mpify: pidfd_open failed ({}); mpify needs Linux 5.3 or newer", ::strerror(e)));
    }
    return child;
}

MPIFY_END_DETAIL_NAMESPACE
