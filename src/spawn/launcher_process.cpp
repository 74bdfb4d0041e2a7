#include "spawn/launcher_process.hpp"

#include "common/posix.hpp"
#include "spawn/command_output.hpp"
#include "spawn/exec_spawner.hpp"

#include <poll.h>
#include <signal.h>

#include <algorithm>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// How much of a launcher's output is kept for the error that names it.
constexpr std::size_t launcher_tail_bytes = 2048;
// How long a launcher has after SIGTERM before SIGKILL.
constexpr std::chrono::milliseconds launcher_grace{1000};

}  // namespace

void LauncherProcess::read_output() {
    if (!output) return;
    const DrainEnd drained = drain_available(output.get(), [this](std::string_view piece) {
        tail.append(piece.data(), piece.size());
        if (tail.size() > launcher_tail_bytes) tail.erase(0, tail.size() - launcher_tail_bytes);
        return true;
    });
    if (drained == DrainEnd::closed) output.reset();
}

bool LauncherProcess::ended() const {
    if (reaped) return true;
    pollfd exited{process.pidfd.get(), POLLIN, 0};
    return ::poll(&exited, 1, 0) == 1;
}

void LauncherProcess::reap() {
    if (!reaped) reaped = wait_for_child(process.pid, &end);
    read_output();
}

void LauncherProcess::stop(std::chrono::milliseconds farewell) noexcept {
    if (reaped) return;
    pollfd exited{process.pidfd.get(), POLLIN, 0};
    if (::poll(&exited, 1, static_cast<int>(std::max<long long>(0, farewell.count()))) != 1) {
        ::kill(-process.pid, SIGTERM);
        (void)::poll(&exited, 1, static_cast<int>(launcher_grace.count()));
    }
    ::kill(-process.pid, SIGKILL);  // what the launcher started and left behind
    reaped = wait_for_child(process.pid, &end);
}

std::unique_ptr<LauncherProcess> start_launcher(const std::string& command, int stdin_fd) {
    auto launcher = std::make_unique<LauncherProcess>();
    launcher->command = command;
    Pipe output = make_pipe();
    LaunchSpec spec = shell_command(command, output.write_end.get());
    spec.stdin_fd = stdin_fd;
    launcher->process = spawn_by_exec(spec);
    launcher->output = std::move(output.read_end);
    set_blocking(launcher->output.get(), false);
    return launcher;
}

MPIFY_END_DETAIL_NAMESPACE
