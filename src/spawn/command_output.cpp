#include "spawn/command_output.hpp"

#include "common/clock.hpp"
#include "common/environment_list.hpp"
#include "common/posix.hpp"
#include "spawn/exec_spawner.hpp"

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <fmt/format.h>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

constexpr std::size_t kept_output_bytes = 64 * 1024;

}  // namespace

LaunchSpec shell_command(const std::string& command, int output_fd) {
    LaunchSpec spec;
    spec.executable = "/bin/sh";
    spec.argv = {"sh", "-c", command};
    spec.env = environment_with({});
    spec.stdout_fd = output_fd;
    spec.stderr_fd = output_fd;
    spec.own_process_group = true;
    return spec;
}

std::string how_it_ended(const siginfo_t& end) {
    return end.si_code == CLD_EXITED ? fmt::format("exit code {}", end.si_status)
                                     : "killed by " + signal_description(end.si_status);
}

CommandOutput command_output(const std::string& command, std::chrono::milliseconds limit) {
    const Clock::time_point deadline = Clock::now() + limit;
    Pipe output = make_pipe();
    const ChildProcess child = spawn_by_exec(shell_command(command, output.write_end.get()));
    output.write_end.reset();  // end of file once the program (and what it started) is done

    CommandOutput result;
    bool in_time = true;
    char buffer[4096];
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        pollfd readable{output.read_end.get(), POLLIN, 0};
        if (left <= 0 || ::poll(&readable, 1, static_cast<int>(left)) == 0) {
            in_time = false;
            break;
        }
        const ReadResult got = read_some(output.read_end.get(), buffer, sizeof buffer);
        if (got.kind != ReadResult::bytes) break;
        if (result.output.size() < kept_output_bytes)
            result.output.append(buffer, std::min(got.size, kept_output_bytes - result.output.size()));
    }
    ::kill(-child.pid, SIGKILL);  // what is left of it, if anything
    siginfo_t end{};
    const bool reaped = wait_for_child(child.pid, &end);
    if (!in_time) {
        result.how = fmt::format("no answer within {} ms", limit.count());
    } else if (!reaped) {
        result.how = "reaped by someone else";
    } else {
        result.succeeded = end.si_code == CLD_EXITED && end.si_status == 0;
        result.how = how_it_ended(end);
    }
    return result;
}

MPIFY_END_DETAIL_NAMESPACE
