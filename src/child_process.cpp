#include "child_process.hpp"

#include "channel.hpp"

#include <mpify/error.hpp>

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fmt/format.h>

namespace mpify::detail {
namespace {

// Fds the child must not confuse with its targets 0-4 are first moved above this.
constexpr int first_high_fd = 10;

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
    std::vector<char*> out;
    out.reserve(strings.size() + 1);
    for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
}

}  // namespace

int place_worker_fds(const int (&sources)[worker_fd_count], bool close_others_now) noexcept {
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
    const unsigned flags = close_others_now ? 0U : CLOSE_RANGE_CLOEXEC;
    if (::syscall(SYS_close_range, static_cast<unsigned>(worker_fd_count), ~0U, flags) != 0) {
        for (int fd = worker_fd_count; fd < 65536; ++fd) {
            if (close_others_now) ::close(fd);
            else ::fcntl(fd, F_SETFD, FD_CLOEXEC);
        }
    }
    return 0;
}

namespace {

// Between fork and exec only async-signal-safe calls: this runs in a copy of a
// multithreaded process whose other threads (and their locks) did not come along.
[[noreturn]] void exec_child(const LaunchSpec& spec, char* const* argv, char* const* envp,
                             int devnull, int error_pipe, pid_t parent) {
    auto fail = [error_pipe](int stage_errno) {
        int e = stage_errno;
        (void)!::write(error_pipe, &e, sizeof e);
        ::_exit(127);
    };
    if (spec.die_with_caller_thread) {
        if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(errno);
        if (::getppid() != parent) ::_exit(127);  // the caller died before prctl took effect
    }

    const int sources[worker_fd_count] = {devnull, spec.stdout_fd, spec.stderr_fd, spec.channel_fd, spec.args_fd};
    // Everything above closes at exec: the caller's sockets, pipes and files stay the
    // caller's. (Close-on-exec rather than closed, so the error pipe stays usable.)
    if (const int e = place_worker_fds(sources, /*close_others_now=*/false)) fail(e);

    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(spec.executable.c_str(), argv, envp);
    fail(errno);
    ::_exit(127);
}

}  // namespace

ChildProcess launch(const LaunchSpec& spec) {
    std::vector<char*> argv = c_strings(spec.argv);
    std::vector<char*> envp = c_strings(spec.env);

    UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    int pipe_fds[2];
    if (!devnull || ::pipe2(pipe_fds, O_CLOEXEC) != 0)
        throw SpawnError(fmt::format("mpify: cannot start a worker: {}", ::strerror(errno)));
    UniqueFd error_read(pipe_fds[0]);
    // Above the fds the child rearranges, so dup2 cannot overwrite it.
    UniqueFd error_write(::fcntl(pipe_fds[1], F_DUPFD_CLOEXEC, first_high_fd));
    ::close(pipe_fds[1]);

    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw SpawnError(fmt::format("mpify: fork failed: {}", ::strerror(errno)));
    if (pid == 0) exec_child(spec, argv.data(), envp.data(), devnull.get(), error_write.get(), parent);

    error_write.reset();
    int child_errno = 0;
    ssize_t n;
    do {
        n = ::read(error_read.get(), &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        throw SpawnError(fmt::format("mpify: cannot execute worker program '{}': {}", spec.executable,
                                     ::strerror(child_errno)));
    }

    return watch_child(pid);
}

ChildProcess watch_child(pid_t pid) {
    ChildProcess child;
    child.pid = pid;
    child.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!child.pidfd) {
        const int e = errno;
        kill_and_reap(pid);
        throw SpawnError(fmt::format("mpify: pidfd_open failed ({}); mpify needs Linux 5.3 or newer",
                                     ::strerror(e)));
    }
    return child;
}

void kill_and_reap(pid_t pid) noexcept {
    ::kill(pid, SIGKILL);
    siginfo_t info{};
    while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED) != 0 && errno == EINTR) {
    }
}

std::string signal_description(int signal) {
    const char* abbrev = ::sigabbrev_np(signal);
    const char* text = ::strsignal(signal);
    if (abbrev == nullptr) return fmt::format("signal {}", signal);
    return fmt::format("SIG{} ({})", abbrev, text ? text : "unknown");
}

}  // namespace mpify::detail
