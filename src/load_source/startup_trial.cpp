#include "load_source/startup_trial.hpp"

#include "common/clock.hpp"
#include "common/posix.hpp"
#include "spawn/worker_host.hpp"

#include <mpify/error.hpp>

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

constexpr auto startup_limit = std::chrono::minutes(2);
constexpr std::size_t output_kept = 4000;  // the end of what the trial printed

std::string marker_of(const std::string& library) { return library + ".started"; }

struct Trial {
    siginfo_t status{};
    bool finished = false;
    std::string output;
};

// Runs `mpify-worker --try-load library`, its stdout and stderr into one pipe.
Trial run_trial(const std::string& library) {
    const std::string worker = find_mpify_worker();
    Pipe output = make_pipe();
    const UniqueFd devnull = open_dev_null(O_RDONLY);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, devnull.get(), STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, output.write_end.get(), STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, output.write_end.get(), STDERR_FILENO);
    const char* argv[] = {worker.c_str(), "--try-load", library.c_str(), nullptr};
    pid_t pid = -1;
    const int error = ::posix_spawn(&pid, worker.c_str(), &actions, nullptr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0)
        throw Error(fmt::format("mpify::load_source: cannot start {} to try {}: {}", worker, library,
                                std::strerror(error)));
    output.write_end.reset();
    const UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));

    Trial trial;
    const auto deadline = Clock::now() + startup_limit;
    bool output_open = true;
    while (output_open || !trial.finished) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) break;
        pollfd fds[2] = {{output_open ? output.read_end.get() : -1, POLLIN, 0}, {pidfd.get(), POLLIN, 0}};
        if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
        if (output_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buffer[4096];
            const ReadResult got = read_some(output.read_end.get(), buffer, sizeof buffer);
            if (got.kind == ReadResult::bytes) {
                trial.output.append(buffer, got.size);
                if (trial.output.size() > 2 * output_kept) trial.output.erase(0, trial.output.size() - output_kept);
            } else {
                output_open = false;
            }
        }
        if (!trial.finished && (pidfd.get() < 0 || (fds[1].revents & POLLIN))) {
            trial.finished = retry_on_eintr([&] { return ::waitid(P_PID, pid, &trial.status, WEXITED | WNOHANG); }) ==
                                 0 &&
                             trial.status.si_pid == pid;
            if (!trial.finished && pidfd.get() < 0) trial.finished = wait_for_child(pid, &trial.status);
        }
    }
    if (!trial.finished) kill_and_reap(pid, pidfd.get());
    if (trial.output.size() > output_kept) trial.output.erase(0, trial.output.size() - output_kept);
    return trial;
}

std::string what_happened(const Trial& trial) {
    if (!trial.finished)
        return fmt::format("did not finish starting within {} minutes (it was stopped)",
                           std::chrono::duration_cast<std::chrono::minutes>(startup_limit).count());
    if (trial.status.si_code == CLD_EXITED) {
        if (trial.status.si_status == 2 && trial.output.find("cannot load") != std::string::npos)
            return "could not be loaded";
        return fmt::format("ended the process with exit status {}", trial.status.si_status);
    }
    const std::string signal = signal_description(trial.status.si_status);
    if (trial.status.si_status == SIGABRT && trial.output.find("terminate called") != std::string::npos)
        return "threw an exception (" + signal + ")";
    return "died of " + signal;
}

}  // namespace

void check_library_starts(const std::string& library, const std::string& source) {
    struct stat marker{};
    if (::stat(marker_of(library).c_str(), &marker) == 0) return;
    const Trial trial = run_trial(library);
    if (trial.finished && trial.status.si_code == CLD_EXITED && trial.status.si_status == 0) {
        const UniqueFd made(::open(marker_of(library).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
        return;  // without a marker (a full disk) the next load tries again: slower, not wrong
    }
    std::string output = trial.output;
    while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
    throw Error(
        fmt::format("mpify::load_source: {} compiled, but its start-up (the static initializers of {}) {} when a "
                    "separate process loaded it, so it was not loaded into this one{}{}",
                    source, library, what_happened(trial), output.empty() ? "" : "; its output:\n", output));
}

void forget_library_start(const std::string& library) { ::unlink(marker_of(library).c_str()); }

MPIFY_END_DETAIL_NAMESPACE
