#include "spawn/command_output.hpp"

#include "common/clock.hpp"
#include "common/environment_list.hpp"
#include "common/posix.hpp"
#include "spawn/exec_spawner.hpp"

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <fmt/format.h>

namespace mpify::detail {
namespace {

constexpr std::size_t kept_output_bytes = 64 * 1024;

}  // namespace

CommandOutput command_output(const std::string& command, std::chrono::milliseconds limit) {
    const Clock::time_point deadline = Clock::now() + limit;
    Pipe output = make_pipe();
    LaunchSpec spec;
    spec.executable = "/bin/sh";
    spec.argv = {"sh", "-c", command};
    spec.env = environment_with({});
    spec.stdout_fd = output.write_end.get();
    spec.stderr_fd = output.write_end.get();
    spec.own_process_group = true;
    const ChildProcess child = spawn_by_exec(spec);
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
    } else if (reaped && end.si_code == CLD_EXITED) {
        result.succeeded = end.si_status == 0;
        result.how = fmt::format("exit code {}", end.si_status);
    } else {
        result.how = reaped ? "killed by " + signal_description(end.si_status) : "reaped by someone else";
    }
    return result;
}

}  // namespace mpify::detail
