#include "forensics/stack_collector.hpp"

#include "common/byte_codec.hpp"
#include "common/clock.hpp"
#include "common/posix.hpp"
#include "common/read_until.hpp"
#include "forensics/stack_dump_format.hpp"
#include "spawn/command_output.hpp"
#include "spawn/worker_host.hpp"

#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fmt/format.h>
#include <mutex>
#include <optional>
#include <stdexcept>

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

// Asks a remote rank's stand-in where the rank is: what an earlier question's late
// answer left in the socket goes first. False when the stand-in is gone.
bool ask_stand_in(int control) {
    char stale[4096];
    while (read_some(control, stale, sizeof stale).kind == ReadResult::bytes) {
    }
    const char question = 'S';
    return retry_on_eintr([&] { return ::send(control, &question, 1, MSG_NOSIGNAL); }) == 1;
}

// The stand-in's answer: a u32 size, then the dump; nullopt if it has not come by `deadline`.
std::optional<std::string> stand_in_answer(int control, Clock::time_point deadline) {
    std::string bytes;
    std::optional<std::string> answer;
    read_until_done({control}, deadline, [&](std::size_t, std::string_view piece) {
        bytes.append(piece);
        if (bytes.size() < 4) return true;
        ByteReader<std::runtime_error> header(std::string_view(bytes).substr(0, 4), "a stand-in's answer");
        const std::uint32_t size = header.u32("its size");
        if (bytes.size() < 4 + std::size_t(size)) return true;
        answer = bytes.substr(4, size);
        return false;
    });
    return answer;
}

}  // namespace

RankStack stack_from(const StackTarget& target, const CommandOutput& output) {
    RankStack stack;
    stack.rank = target.rank;
    stack.host = target.host;
    std::vector<DumpedProcess> dumped = parse_stack_dump(output.output);
    DumpedProcess process = dumped.empty() ? DumpedProcess{} : std::move(dumped.front());
    // The record comes first, before any stack: kept even when the stacks never came.
    stack.collectives = std::move(process.collectives);
    stack.collectives_ignored = std::move(process.record_ignored);
    if (process.threads.empty() && process.error.empty()) {
        stack.unavailable = fmt::format("not read: mpify-stacks gave no answer ({})", output.how);
        return stack;
    }
    if (process.threads.empty()) {
        // An agent's answer says "not read: ..." itself.
        stack.unavailable = process.error.rfind("not read", 0) == 0
                                ? process.error
                                : "not read: " + process.error + advice_for(process.error);
        return stack;
    }
    const pid_t first = target.rank_thread != 0 ? target.rank_thread : target.pid;
    std::stable_partition(process.threads.begin(), process.threads.end(),
                          [first](const ThreadStack& thread) { return thread.tid == first; });
    stack.threads = std::move(process.threads);
    stack.unavailable = std::move(process.error);  // what of the threads is missing, if any
    return stack;
}

namespace {

// Asks the stand-in of each remote target to have its rank read on its machine; the
// targets asked, whose answers read_remote_answers() takes.
std::vector<std::size_t> ask_remote_targets(const std::vector<StackTarget>& targets, std::vector<RankStack>& stacks) {
    std::vector<std::size_t> asked;
    for (std::size_t i = 0; i < targets.size(); ++i) {
        if (!targets[i].unreadable.empty() || !targets[i].control) continue;
        if (ask_stand_in(targets[i].control->get())) asked.push_back(i);
        else stacks[i].unavailable = "not read: its stand-in had ended";
    }
    return asked;
}

// Reads every local target with an mpify-stacks of its own, all at once, within `limit`.
void read_local_targets(const std::vector<StackTarget>& targets, std::chrono::milliseconds limit,
                        std::vector<RankStack>& stacks) {
    const std::optional<std::string> program = find_mpify_program("mpify-stacks");
    std::vector<LaunchSpec> readers;
    std::vector<std::size_t> read;  // the targets the readers are for
    bool reads_this_process = false;
    for (std::size_t i = 0; i < targets.size(); ++i) {
        if (!targets[i].unreadable.empty() || targets[i].control) continue;
        if (!program) {
            stacks[i].unavailable =
                "not read: mpify-stacks is not installed beside libmpify (it is built where elfutils' libdw is: "
                "install libdw-dev and build mpify again)";
            continue;
        }
        LaunchSpec spec;
        spec.executable = *program;
        // Unwinding stops at three quarters of the limit: the record and what was unwound
        // by then still come within it (starting the reader and its answer take the rest).
        spec.argv = {"mpify-stacks", "--within", std::to_string(limit.count() * 3 / 4), std::to_string(targets[i].pid)};
        // No environment: reading the caller's while another thread sets a variable (the
        // caller's rank restoring its own) would race, and the reader needs none (nor
        // DEBUGINFOD_URLS: it looks for debug information on this machine only).
        spec.env = {};
        readers.push_back(std::move(spec));
        read.push_back(i);
        reads_this_process = reads_this_process || targets[i].pid == ::getpid();
    }
    if (readers.empty()) return;
    const SelfTracingAllowed allowed(reads_this_process);
    std::vector<CommandOutput> outputs;
    try {
        outputs = programs_output(std::move(readers), limit, kept_dump_bytes);
    } catch (const std::exception& e) {
        for (const std::size_t i : read) stacks[i].unavailable = fmt::format("not read: {}", e.what());
    }
    for (std::size_t k = 0; k < outputs.size(); ++k) {
        stacks[read[k]] = stack_from(targets[read[k]], outputs[k]);
        if (!stacks[read[k]].threads.empty() || outputs[k].succeeded) continue;
        if (outputs[k].how.rfind("no answer", 0) == 0)
            stacks[read[k]].unavailable = fmt::format("not read within {} ms", limit.count());
    }
}

// Takes the answers of the stand-ins asked, each by `deadline`.
void read_remote_answers(const std::vector<StackTarget>& targets, const std::vector<std::size_t>& asked,
                         Clock::time_point deadline, std::chrono::milliseconds limit, std::vector<RankStack>& stacks) {
    for (const std::size_t i : asked) {
        std::optional<std::string> answer;
        try {
            answer = stand_in_answer(targets[i].control->get(), deadline);
        } catch (const std::exception&) {  // a malformed answer: as none
        }
        if (!answer) {
            stacks[i].unavailable = fmt::format("not read within {} ms (asked of its machine's agent)", limit.count());
            continue;
        }
        CommandOutput output;
        output.succeeded = true;
        output.output = std::move(*answer);
        stacks[i] = stack_from(targets[i], output);
    }
}

}  // namespace

std::vector<RankStack> collect_stacks(const std::vector<StackTarget>& targets, std::chrono::milliseconds limit) {
    std::vector<RankStack> stacks(targets.size());
    for (std::size_t i = 0; i < targets.size(); ++i) {
        stacks[i].rank = targets[i].rank;
        stacks[i].host = targets[i].host;
        stacks[i].unavailable = targets[i].unreadable;
    }
    const Clock::time_point deadline = Clock::now() + limit;
    // One reading at a time in this process: a stand-in's socket carries one answer.
    static std::mutex one_reading;
    const std::lock_guard<std::mutex> lock(one_reading);
    // Ranks on other machines are asked first, and read there while the others are read here.
    const std::vector<std::size_t> asked = ask_remote_targets(targets, stacks);
    read_local_targets(targets, limit, stacks);
    read_remote_answers(targets, asked, deadline, limit, stacks);
    return stacks;
}

std::string worker_stack_dump(pid_t pid, bool ended, std::chrono::milliseconds limit, std::size_t most_bytes) {
    DumpedProcess dumped;
    dumped.pid = pid;
    if (ended) {
        dumped.error = "not read: it had ended";
    } else {
        RankStack stack = collect_stacks({{-1, {}, pid, 0, {}, nullptr}}, limit).front();
        dumped.threads = std::move(stack.threads);
        dumped.collectives = std::move(stack.collectives);
        dumped.error = std::move(stack.unavailable);
    }
    std::string dump = format_stack_dump({dumped});
    if (dump.size() > most_bytes) dump.resize(most_bytes);  // the rank's own thread comes first
    return dump;
}

MPIFY_END_DETAIL_NAMESPACE
