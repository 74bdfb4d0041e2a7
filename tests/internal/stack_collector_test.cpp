// Reading where a process is (forensics/): what mpify-stacks prints reads back as it was
// written, a summary shows the user's frames, and a process that cannot be read is named
// with the reason: held by another tracer, gone, or slower than the limit.
#include "common/posix.hpp"  // kill_and_reap
#include "forensics/collective_record.hpp"
#include "forensics/stack_collector.hpp"
#include "forensics/stack_dump_format.hpp"
#include "spawn/command_output.hpp"
#include "spawn/worker_host.hpp"  // find_mpify_program

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

using namespace mpify::detail;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {

// Returns once `child` has said it is about to wait (a byte on `ready`) and sleeps: then its
// innermost frame is pause(), not fork's return path, however loaded the machine.
void wait_until_paused(pid_t child, int ready) {
    char byte = 0;
    REQUIRE(::read(ready, &byte, 1) == 1);
    ::close(ready);
    const std::string stat_file = "/proc/" + std::to_string(child) + "/stat";
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (;;) {
        std::ifstream in(stat_file);
        std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const auto name_end = stat.rfind(')');
        if (name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] == 'S') return;
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        std::this_thread::yield();
    }
}

// A child that waits until it is killed, in pause(); `before_waiting` runs first in it.
template <class F>
pid_t start_paused_child(F before_waiting) {
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(ready[0]);
        before_waiting();
        (void)!::write(ready[1], "r", 1);
        for (;;) ::pause();
    }
    ::close(ready[1]);
    wait_until_paused(child, ready[0]);
    return child;
}

// A child that waits until it is killed.
pid_t start_waiting_child() {
    return start_paused_child([] {});
}

// A child that waits until it is killed, in an all-reduce of its group's record.
pid_t start_child_waiting_in_a_collective() {
    return start_paused_child([] {
        open_collective_record(0, 2);
        CallToRecord call;
        call.operation = "allreduce";
        call.dtype = "Float";
        call.elements = 1;
        call.bytes = 4;
        call.detail = "SUM";
        call.site = "stack_collector_test";
        record_call_started(call);
    });
}

}  // namespace

TEST_CASE("a stack dump reads back as it was written", "[stacks]") {
    DumpedProcess process;
    process.pid = 42;
    mpify::ThreadStack thread;
    thread.tid = 43;
    thread.name = "with\ttab";
    thread.frames.push_back({0x1234, "train_step(int)", "/src/cnn.hpp", 41, "/opt/model/libmodel.so"});
    thread.frames.push_back({0x99, "", "", 0, ""});
    process.threads.push_back(thread);
    DumpedProcess failed;
    failed.pid = 7;
    failed.error = "thread 7: PTRACE_SEIZE: Operation not permitted";
    const std::vector<DumpedProcess> read = parse_stack_dump(format_stack_dump({process, failed}));
    REQUIRE(read.size() == 2);
    REQUIRE(read[0].threads.size() == 1);
    CHECK(read[0].threads[0].name == "with tab");  // a tab in a field becomes a space
    REQUIRE(read[0].threads[0].frames.size() == 2);
    CHECK(read[0].threads[0].frames[0].address == 0x1234);
    CHECK(read[0].threads[0].frames[0].function == "train_step(int)");
    CHECK(read[0].threads[0].frames[0].line == 41);
    CHECK(read[0].threads[0].frames[1].function.empty());
    CHECK(read[1].error == failed.error);
    // A dump cut short keeps what came before the cut.
    const std::string whole = format_stack_dump({process});
    CHECK(parse_stack_dump(whole.substr(0, whole.size() - 10)).front().threads.front().frames.size() == 1);
}

TEST_CASE("a summary shows the user's own frames, innermost first", "[stacks]") {
    mpify::RankStack stack;
    mpify::ThreadStack thread;
    thread.frames = {
        {1, "read", "../sysdeps/unix/sysv/linux/read.c", 26, "/usr/lib/x86_64-linux-gnu/libc.so.6"},
        {2, "mpify::detail::wait_for_collective(c10d::Work&)", "/src/ddp/collective_wait.cpp", 80,
         "/opt/mpify/lib/libmpify_torch.so.0.1.0"},
        {3, "std::function<void ()>::operator()() const", "/usr/include/c++/12/bits/std_function.h", 591,
         "/home/me/libmodel.so"},
        {4, "train_step(Model&, std::vector<int, std::allocator<int> > const&)", "/home/me/cnn.hpp", 41,
         "/home/me/libmodel.so"},
        {5, "fit()", "/home/me/learner.cpp", 120, "/home/me/libmodel.so"},
    };
    stack.threads.push_back(thread);
    CHECK(stack.summary() == "train_step(...) at cnn.hpp:41 <- fit() at learner.cpp:120");
    CHECK_THAT(stack.describe(), Contains("#0 read at ../sysdeps/unix/sysv/linux/read.c:26 (libc.so.6)"));
    mpify::RankStack unread;
    unread.unavailable = "not read within 2000 ms";
    CHECK(unread.summary() == "not read within 2000 ms");
}

// The limit of the reads whose outcome is not the limit's: it only bounds a failure (a
// loaded machine reading a process that maps LibTorch 2.x takes seconds).
constexpr std::chrono::milliseconds reading_limit{20000};

TEST_CASE("a process that cannot be read is named with the reason", "[stacks]") {
    SECTION("another tracer holds it") {
        const pid_t child = start_waiting_child();
        REQUIRE(::ptrace(PTRACE_SEIZE, child, nullptr, nullptr) == 0);  // none other may now
        const std::vector<mpify::RankStack> stacks = collect_stacks({{7, "", child, 0, "", nullptr}}, reading_limit);
        kill_and_reap(child);
        REQUIRE(stacks.size() == 1);
        CHECK(stacks[0].rank == 7);
        CHECK(stacks[0].threads.empty());
        CHECK_THAT(stacks[0].unavailable,
                   Contains("PTRACE_SEIZE: Operation not permitted") && Contains("ptrace is not allowed here"));
    }
    SECTION("it is gone") {
        const pid_t child = start_waiting_child();
        kill_and_reap(child);
        const std::vector<mpify::RankStack> stacks = collect_stacks({{3, "", child, 0, "", nullptr}}, reading_limit);
        CHECK_THAT(stacks[0].unavailable, Contains("it ended before its stack was read"));
    }
    SECTION("the limit passes first") {
        const pid_t child = start_waiting_child();
        const std::vector<mpify::RankStack> stacks = collect_stacks({{1, "", child, 0, "", nullptr}}, 1ms);
        kill_and_reap(child);
        CHECK(stacks[0].unavailable == "not read within 1 ms");
    }
    SECTION("a target named unreadable is not read") {
        const std::vector<mpify::RankStack> stacks =
            collect_stacks({{2, "node2", 1, 0, "not read: on another machine", nullptr}}, 2000ms);
        CHECK(stacks[0].host == "node2");
        CHECK(stacks[0].unavailable == "not read: on another machine");
    }
}

TEST_CASE("a process is read with its threads, the one asked for first", "[stacks]") {
    const pid_t child = start_waiting_child();
    const std::vector<mpify::RankStack> stacks = collect_stacks({{0, "", child, 0, "", nullptr}}, reading_limit);
    kill_and_reap(child);
    REQUIRE(stacks[0].unavailable.empty());
    REQUIRE(stacks[0].threads.size() == 1);
    CHECK(stacks[0].threads[0].tid == child);
    REQUIRE_FALSE(stacks[0].threads[0].frames.empty());
    CHECK_THAT(stacks[0].threads[0].frames[0].function, Contains("pause"));
}

TEST_CASE("a reader killed at the deadline after the record still gives the record", "[stacks]") {
    // What mpify-stacks prints while the process's threads are held: its first line and
    // its record, before any stack.
    mpify::CollectiveCall call;
    call.sequence = 3;
    call.operation = "allreduce";
    call.dtype = "Float";
    call.elements = 1;
    call.bytes = 4;
    call.detail = "SUM";
    call.site = "mpify::ddp::all_reduce";
    CommandOutput killed;
    killed.how = "no answer within 2000 ms";
    killed.output = process_line(4242, "") + call_line(call);
    const mpify::RankStack stack = stack_from({2, "", 4242, 0, "", nullptr}, killed);
    CHECK(stack.threads.empty());
    CHECK_THAT(stack.unavailable, Contains("no answer within 2000 ms"));
    REQUIRE(stack.collectives.size() == 1);
    CHECK(stack.collectives[0].describe() == "allreduce #3 (mpify::ddp::all_reduce: Float x 1, 4 bytes, SUM)");
    // The threads came after all, and then what was cut: said by a line after them.
    ThreadStack thread;
    thread.tid = 4242;
    thread.name = "worker";
    CommandOutput cut;
    cut.succeeded = true;
    cut.output = killed.output + thread_lines(thread) + error_line("not read in full: the time given ran out");
    const mpify::RankStack partial = stack_from({2, "", 4242, 0, "", nullptr}, cut);
    REQUIRE(partial.threads.size() == 1);
    CHECK(partial.unavailable == "not read in full: the time given ran out");
    CHECK(partial.collectives.size() == 1);
}

TEST_CASE("a read whose time runs out still gives the record and the threads, without their frames", "[stacks]") {
    const std::optional<std::string> program = find_mpify_program("mpify-stacks");
    REQUIRE(program);
    const pid_t child = start_child_waiting_in_a_collective();
    LaunchSpec reader;
    reader.executable = *program;
    reader.argv = {"mpify-stacks", "--within", "0", std::to_string(child)};
    const std::vector<CommandOutput> outputs = programs_output({reader}, 10s, 1 << 20);
    kill_and_reap(child);
    REQUIRE(outputs.size() == 1);
    INFO(outputs[0].how << ": " << outputs[0].output);
    REQUIRE(outputs[0].succeeded);
    const std::vector<DumpedProcess> read = parse_stack_dump(outputs[0].output);
    REQUIRE(read.size() == 1);
    CHECK_THAT(read[0].error, Contains("not read in full: the time given ran out"));
    REQUIRE(read[0].collectives.size() == 1);
    CHECK(read[0].collectives[0].describe() == "allreduce #1 (stack_collector_test: Float x 1, 4 bytes, SUM)");
    REQUIRE(read[0].threads.size() == 1);
    CHECK(read[0].threads[0].tid == child);
    CHECK(read[0].threads[0].frames.empty());
}
