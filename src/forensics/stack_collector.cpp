#include "forensics/stack_collector.hpp"

#include "common/environment_list.hpp"
#include "forensics/stack_dump_format.hpp"
#include "spawn/command_output.hpp"
#include "spawn/worker_host.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <fmt/format.h>
#include <optional>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Stacks of a process with many threads run long; past this, a dump's last threads are
// cut (the rank's own comes first and stays).
constexpr std::size_t kept_dump_bytes = 1 << 20;

// Under Yama's ptrace_scope 1 a process may be traced by its ancestors only, unless it
// names a tracer: this process names itself (and so its children) while mpify-stacks
// reads it. Where Yama is absent the calls fail with EINVAL and change nothing.
class SelfTracingAllowed {
public:
    explicit SelfTracingAllowed(bool wanted) : wanted_(wanted) {
        if (wanted_) ::prctl(PR_SET_PTRACER, static_cast<unsigned long>(::getpid()), 0, 0, 0);
    }
    ~SelfTracingAllowed() {
        if (wanted_) ::prctl(PR_SET_PTRACER, 0, 0, 0, 0);
    }
    SelfTracingAllowed(const SelfTracingAllowed&) = delete;
    SelfTracingAllowed& operator=(const SelfTracingAllowed&) = delete;

private:
    bool wanted_;
};

std::string advice_for(const std::string& error) {
    if (error.find("Operation not permitted") != std::string::npos)
        return " (ptrace is not allowed here: another tracer, a debugger, holds it, or the system forbids it; "
               "see docs/hangs.md)";
    if (error.find("No such process") != std::string::npos || error.find("no thread found") != std::string::npos)
        return " (it ended before its stack was read)";
    return "";
}

RankStack stack_from(const StackTarget& target, const CommandOutput& output) {
    RankStack stack;
    stack.rank = target.rank;
    stack.host = target.host;
    std::vector<DumpedProcess> dumped = parse_stack_dump(output.output);
    if (dumped.empty() || (dumped.front().threads.empty() && dumped.front().error.empty())) {
        stack.unavailable = fmt::format("not read: mpify-stacks gave no answer ({})", output.how);
        return stack;
    }
    DumpedProcess& process = dumped.front();
    if (process.threads.empty()) {
        stack.unavailable = "not read: " + process.error + advice_for(process.error);
        return stack;
    }
    const pid_t first = target.rank_thread != 0 ? target.rank_thread : target.pid;
    std::stable_partition(process.threads.begin(), process.threads.end(),
                          [first](const ThreadStack& thread) { return thread.tid == first; });
    stack.threads = std::move(process.threads);
    return stack;
}

}  // namespace

std::vector<RankStack> collect_stacks(const std::vector<StackTarget>& targets, std::chrono::milliseconds limit) {
    std::vector<RankStack> stacks(targets.size());
    for (std::size_t i = 0; i < targets.size(); ++i) {
        stacks[i].rank = targets[i].rank;
        stacks[i].host = targets[i].host;
        stacks[i].unavailable = targets[i].unreadable;
    }
    const std::optional<std::string> program = find_mpify_program("mpify-stacks");
    std::vector<LaunchSpec> readers;
    std::vector<std::size_t> read;  // the targets the readers are for
    bool reads_this_process = false;
    for (std::size_t i = 0; i < targets.size(); ++i) {
        if (!targets[i].unreadable.empty()) continue;
        if (!program) {
            stacks[i].unavailable =
                "not read: mpify-stacks is not installed beside libmpify (it is built where elfutils' libdw is: "
                "install libdw-dev and build mpify again)";
            continue;
        }
        LaunchSpec spec;
        spec.executable = *program;
        spec.argv = {"mpify-stacks", std::to_string(targets[i].pid)};
        spec.env = environment_with({});
        readers.push_back(std::move(spec));
        read.push_back(i);
        reads_this_process = reads_this_process || targets[i].pid == ::getpid();
    }
    if (readers.empty()) return stacks;
    const SelfTracingAllowed allowed(reads_this_process);
    std::vector<CommandOutput> outputs;
    try {
        outputs = programs_output(std::move(readers), limit, kept_dump_bytes);
    } catch (const std::exception& e) {
        for (const std::size_t i : read) stacks[i].unavailable = fmt::format("not read: {}", e.what());
        return stacks;
    }
    for (std::size_t k = 0; k < read.size(); ++k) {
        const StackTarget& target = targets[read[k]];
        stacks[read[k]] = stack_from(target, outputs[k]);
        if (!stacks[read[k]].threads.empty() || outputs[k].succeeded) continue;
        if (outputs[k].how.rfind("no answer", 0) == 0)
            stacks[read[k]].unavailable = fmt::format("not read within {} ms", limit.count());
    }
    return stacks;
}

MPIFY_END_DETAIL_NAMESPACE
