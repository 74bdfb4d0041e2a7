#include "spawn/exec_spawner.hpp"

#include "common/posix.hpp"
#include "contract/child_setup.hpp"

#include <mpify/error.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <fmt/format.h>
#include <system_error>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Between the child's start and exec only async-signal-safe calls: this runs in a
// multithreaded process's memory (a copy, or the caller's own while it waits) whose other
// threads (and their locks) did not come along.
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

// What the new process needs before it runs exec_child.
struct ExecChildArguments {
    const LaunchSpec* spec;
    const ChildSetup* setup;
    char* const* argv;
    char* const* envp;
    int error_pipe;
};

// GCC says it builds with a sanitizer by a macro, Clang through __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MPIFY_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MPIFY_UNDER_SANITIZER 1
#endif
#endif

#ifdef MPIFY_UNDER_SANITIZER
// The sanitizers keep state per thread that a child sharing the caller's memory would
// corrupt: under them, a plain fork.
pid_t start_exec_child(ExecChildArguments& arguments) {
    const pid_t pid = ::fork();
    if (pid == 0) exec_child(*arguments.spec, *arguments.setup, arguments.argv, arguments.envp, arguments.error_pipe);
    return pid;
}
#else
// The child borrows the caller's memory until it execs (CLONE_VM | CLONE_VFORK, as
// posix_spawn does): no copy of the caller's page tables, whose cost grows with what the
// caller holds (a notebook with gigabytes of tensors). The caller waits meanwhile.
constexpr std::size_t exec_child_stack_size = 64 * 1024;

int run_exec_child(void* raw) {
    auto& arguments = *static_cast<ExecChildArguments*>(raw);
    // The caller's handlers would run on the caller's memory: back to the defaults (the
    // ignored stay ignored, as exec keeps them) before set_up_worker_child unblocks.
    for (int signal = 1; signal < NSIG; ++signal) {
        struct sigaction current{};
        if (::sigaction(signal, nullptr, &current) != 0) continue;
        if (current.sa_handler == SIG_IGN || current.sa_handler == SIG_DFL) continue;
        struct sigaction reset{};
        reset.sa_handler = SIG_DFL;
        ::sigaction(signal, &reset, nullptr);
    }
    exec_child(*arguments.spec, *arguments.setup, arguments.argv, arguments.envp, arguments.error_pipe);
}

pid_t start_exec_child(ExecChildArguments& arguments) {
    void* stack =
        ::mmap(nullptr, exec_child_stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return -1;
    // Every signal blocked until the child has reset its handlers; the caller's mask back after.
    sigset_t all, before;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &before);
    const pid_t pid = ::clone(run_exec_child, static_cast<char*>(stack) + exec_child_stack_size,
                              CLONE_VM | CLONE_VFORK | SIGCHLD, &arguments);
    const int clone_error = errno;
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    ::munmap(stack, exec_child_stack_size);
    errno = clone_error;
    return pid;
}
#endif

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

    ExecChildArguments arguments{&spec, &setup, argv.data(), envp.data(), errors.write_end.get()};
    const pid_t pid = start_exec_child(arguments);
    if (pid < 0) throw SpawnError(fmt::format("mpify: cannot start a process: {}", ::strerror(errno)));

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
