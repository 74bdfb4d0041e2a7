#include "spawn/command_output.hpp"

#include "common/clock.hpp"
#include "common/environment_list.hpp"
#include "common/posix.hpp"
#include "common/read_until.hpp"
#include "spawn/exec_spawner.hpp"

#include <signal.h>

#include <algorithm>
#include <fmt/format.h>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

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

namespace {

constexpr std::size_t kept_command_bytes = 64 * 1024;

struct RunningProgram {
    ChildProcess child;
    UniqueFd output;  // its stdout and stderr
};

// Kills what is left of each program (its process group) and reaps it; with `results`,
// says how each ended (`ended[i]` false: its output had not ended when the time ran out).
void kill_and_reap(std::vector<RunningProgram>& running, const std::vector<bool>& ended,
                   std::vector<CommandOutput>* results, std::chrono::milliseconds limit) {
    for (std::size_t i = 0; i < running.size(); ++i) {
        ::kill(-running[i].child.pid, SIGKILL);  // what is left of it, if anything
        siginfo_t end{};
        const bool reaped = wait_for_child(running[i].child.pid, &end);
        if (results == nullptr) continue;
        CommandOutput& result = (*results)[i];
        if (!ended[i]) {
            result.how = fmt::format("no answer within {} ms", limit.count());
        } else if (!reaped) {
            result.how = "reaped by someone else";
        } else {
            result.succeeded = end.si_code == CLD_EXITED && end.si_status == 0;
            result.how = how_it_ended(end);
        }
    }
}

// Starts each program leading its own process group, its output into a pipe of its own.
// One that cannot start stops those started before it.
std::vector<RunningProgram> start_programs(std::vector<LaunchSpec> programs) {
    std::vector<RunningProgram> running;
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
        kill_and_reap(running, std::vector<bool>(running.size(), true), nullptr, {});
        throw;
    }
    return running;
}

}  // namespace

std::vector<CommandOutput> programs_output(std::vector<LaunchSpec> programs, std::chrono::milliseconds limit,
                                           std::size_t kept_bytes) {
    const Clock::time_point deadline = Clock::now() + limit;
    std::vector<RunningProgram> running = start_programs(std::move(programs));
    std::vector<CommandOutput> results(running.size());
    std::vector<int> outputs;
    for (const RunningProgram& program : running) outputs.push_back(program.output.get());
    const std::vector<bool> ended = read_until_done(outputs, deadline, [&](std::size_t i, std::string_view piece) {
        std::string& kept = results[i].output;
        if (kept.size() < kept_bytes) kept.append(piece.substr(0, kept_bytes - kept.size()));
        return true;
    });
    kill_and_reap(running, ended, &results, limit);
    return results;
}

CommandOutput command_output(const std::string& command, std::chrono::milliseconds limit) {
    return programs_output({shell_command(command, -1)}, limit, kept_command_bytes).front();
}

MPIFY_END_DETAIL_NAMESPACE
