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

constexpr std::size_t kept_command_bytes = 64 * 1024;

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
    return programs_output({shell_command(command, -1)}, limit, kept_command_bytes).front();
}

std::vector<CommandOutput> programs_output(std::vector<LaunchSpec> programs, std::chrono::milliseconds limit,
                                           std::size_t kept_bytes) {
    const Clock::time_point deadline = Clock::now() + limit;
    struct Running {
        ChildProcess child;
        UniqueFd output;  // closed at its end of file
    };
    std::vector<Running> running;
    const auto kill_and_reap_all = [&running, limit](std::vector<CommandOutput>* results, bool in_time) {
        for (std::size_t i = 0; i < running.size(); ++i) {
            ::kill(-running[i].child.pid, SIGKILL);  // what is left of it, if anything
            siginfo_t end{};
            const bool reaped = wait_for_child(running[i].child.pid, &end);
            if (results == nullptr) continue;
            CommandOutput& result = (*results)[i];
            if (!in_time && running[i].output) {
                result.how = fmt::format("no answer within {} ms", limit.count());
            } else if (!reaped) {
                result.how = "reaped by someone else";
            } else {
                result.succeeded = end.si_code == CLD_EXITED && end.si_status == 0;
                result.how = how_it_ended(end);
            }
        }
    };
    try {
        for (LaunchSpec& spec : programs) {
            Pipe output = make_pipe();
            spec.stdout_fd = spec.stderr_fd = output.write_end.get();
            spec.own_process_group = true;
            running.push_back({spawn_by_exec(spec), std::move(output.read_end)});
            // output.write_end closes here: end of file once the program (and what it
            // started) is done.
        }
    } catch (...) {
        kill_and_reap_all(nullptr, false);
        throw;
    }

    std::vector<CommandOutput> results(running.size());
    char buffer[4096];
    bool in_time = true;
    for (;;) {
        std::vector<pollfd> open;
        std::vector<std::size_t> which;
        for (std::size_t i = 0; i < running.size(); ++i)
            if (running[i].output) {
                open.push_back({running[i].output.get(), POLLIN, 0});
                which.push_back(i);
            }
        if (open.empty()) break;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0 || ::poll(open.data(), open.size(), static_cast<int>(left)) == 0) {
            in_time = false;
            break;
        }
        for (std::size_t k = 0; k < open.size(); ++k) {
            if (open[k].revents == 0) continue;
            Running& program = running[which[k]];
            std::string& kept = results[which[k]].output;
            const ReadResult got = read_some(program.output.get(), buffer, sizeof buffer);
            if (got.kind != ReadResult::bytes) {
                program.output.reset();
                continue;
            }
            if (kept.size() < kept_bytes) kept.append(buffer, std::min(got.size, kept_bytes - kept.size()));
        }
    }
    kill_and_reap_all(&results, in_time);
    return results;
}

MPIFY_END_DETAIL_NAMESPACE
