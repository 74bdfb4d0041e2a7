#include "spawn/exec_spawner.hpp"

#include "common/posix.hpp"
#include "contract/child_setup.hpp"

#include <mpify/error.hpp>

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <fmt/format.h>
#include <system_error>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Between fork and exec only async-signal-safe calls: this runs in a copy of a
// multithreaded process whose other threads (and their locks) did not come along.
// A failure is reported as its errno through `error_pipe`.
[[noreturn]] void exec_child(const LaunchSpec& spec, const ChildSetup& setup, char* const* argv, char* const* envp,
                             int error_pipe) {
    int error = set_up_worker_child(setup);
    if (error == 0) {
        ::execve(spec.executable.c_str(), argv, envp);
        error = errno;
    }
    (void)!::write(error_pipe, &error, sizeof error);
    ::_exit(127);
}

}  // namespace

ChildProcess spawn_by_exec(const LaunchSpec& spec) {
    const CStringArray argv(spec.argv);
    const CStringArray envp(spec.env);
    UniqueFd devnull;
    Pipe errors;
    try {
        devnull = open_dev_null(O_RDONLY);
        errors = make_pipe();
        // Above the fds the child lays out, so that no dup2 there can overwrite it.
        errors.write_end.reset(::fcntl(errors.write_end.get(), F_DUPFD_CLOEXEC, worker_fd_count));
        if (!errors.write_end) throw std::system_error(errno, std::generic_category(), "mpify: fcntl");
    } catch (const std::system_error& e) {
        throw SpawnError(fmt::format("mpify: cannot start a worker: {}", e.what()));
    }
    // Everything but fds 0-4 closes at exec (close-on-exec rather than closed, so the
    // error pipe stays usable until then): the caller's sockets, pipes and files stay
    // the caller's.
    ChildSetup setup;
    setup.sources[0] = spec.stdin_fd >= 0 ? spec.stdin_fd : devnull.get();
    setup.sources[1] = spec.stdout_fd;
    setup.sources[2] = spec.stderr_fd;
    setup.sources[worker_channel_fd] = spec.channel_fd;
    setup.sources[worker_args_fd] = spec.args_fd;
    setup.die_with_parent = spec.die_with_caller_thread;
    setup.parent = ::getpid();
    setup.close_others_now = false;
    setup.own_process_group = spec.own_process_group;

    const pid_t pid = ::fork();
    if (pid < 0) throw SpawnError(fmt::format("mpify: fork failed: {}", ::strerror(errno)));
    if (pid == 0) exec_child(spec, setup, argv.data(), envp.data(), errors.write_end.get());

    errors.write_end.reset();
    int child_errno = 0;
    if (retry_on_eintr([&] { return ::read(errors.read_end.get(), &child_errno, sizeof child_errno); }) > 0) {
        wait_for_child(pid);
        throw SpawnError(fmt::format("mpify: cannot execute worker program '{}': {}", spec.executable,
                                     ::strerror(child_errno)));
    }
    return adopt_child(pid);
}

MPIFY_END_DETAIL_NAMESPACE
