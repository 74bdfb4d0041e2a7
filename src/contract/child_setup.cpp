#include "contract/child_setup.hpp"

#include "common/posix.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Fds the child must not confuse with its targets 0-4 are first moved above this.
constexpr int first_high_fd = 10;

int place_fds(const int (&sources)[worker_fd_count], bool close_others_now) noexcept {
    int moved[worker_fd_count];
    for (int i = 0; i < worker_fd_count; ++i) {
        moved[i] = sources[i] < 0 ? -1 : ::fcntl(sources[i], F_DUPFD_CLOEXEC, first_high_fd);
        if (sources[i] >= 0 && moved[i] < 0) return errno;
    }
    for (int target = 0; target < worker_fd_count; ++target)
        if (moved[target] >= 0 && ::dup2(moved[target], target) < 0) return errno;  // clears CLOEXEC
    // Without a source, 1 and 2 stay the parent's; the channel and argument slots do not.
    for (int target = worker_channel_fd; target < worker_fd_count; ++target) {
        if (moved[target] >= 0) continue;
        if (close_others_now) ::close(target);
        else ::fcntl(target, F_SETFD, FD_CLOEXEC);
    }
    close_fds_from(worker_fd_count, !close_others_now);
    return 0;
}

}  // namespace

int set_up_worker_child(const ChildSetup& setup) noexcept {
    if (setup.die_with_parent) {
        if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return errno;
        if (::getppid() != setup.parent) return ESRCH;
        // Under Yama's ptrace_scope 1 only ancestors may read a process's stacks; the
        // parent's mpify-stacks is its child, not ours. Let the parent's descendants
        // (where Yama is absent this fails with EINVAL, and nothing needs it).
        ::prctl(PR_SET_PTRACER, static_cast<unsigned long>(setup.parent), 0, 0, 0);
    }
    if (setup.own_process_group && ::setpgid(0, 0) != 0) return errno;
    if (const int e = place_fds(setup.sources, setup.close_others_now)) return e;
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    return 0;
}

MPIFY_END_DETAIL_NAMESPACE
