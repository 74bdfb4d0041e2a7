// The supervisor's rules on their own: how a worker's end is classified, how a stop
// escalates, how failures are ordered into what ranch throws, and how output is split into
// lines. The supervisor itself is driven with forked children that play a worker's part
// (no spawner, no mpify-worker), each written to take one path through it.
#include "call/failure_log.hpp"
#include "call/interrupt_watch.hpp"
#include "call/output_relay.hpp"
#include "call/shrinking_placement.hpp"
#include "call/supervisor.hpp"
#include "call/worker_lifecycle.hpp"
#include "contract/remote_link.hpp"
#include "spawn/child_process.hpp"
#include "wire/frames.hpp"
#include "wire/messages.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace mpify;
using namespace mpify::detail;
using namespace std::chrono_literals;

namespace {

WorkerRecord record(WorkerPhase phase, bool sent_result, bool failure_recorded = false, bool cut_frame = false) {
    return WorkerRecord{2, phase, sent_result, failure_recorded, cut_frame};
}
ExitStatus exited_with(int code) { return ExitStatus{false, true, code}; }
ExitStatus killed_by(int signal) { return ExitStatus{false, false, signal}; }

}  // namespace

TEST_CASE("a worker's end is classified from its status and what it sent", "[supervisor]") {
    SECTION("a result and exit 0 is a success") {
        CHECK_FALSE(classify_exit(exited_with(0), record(WorkerPhase::running, true)));
    }
    SECTION("exit 0 without a result: fn called exit()") {
        const auto failure = classify_exit(exited_with(0), record(WorkerPhase::running, false));
        REQUIRE(failure);
        CHECK(failure->rank == 2);
        CHECK(failure->kind == RankFailure::Kind::exited);
        CHECK(failure->exit_code == 0);
        CHECK(failure->message.find("exit()") != std::string::npos);
    }
    SECTION("another exit code, after the result") {
        const auto failure = classify_exit(exited_with(3), record(WorkerPhase::running, true));
        REQUIRE(failure);
        CHECK(failure->kind == RankFailure::Kind::exited);
        CHECK(failure->exit_code == 3);
        CHECK(failure->message == "after sending its result");
    }
    SECTION("a signal") {
        const auto failure = classify_exit(killed_by(SIGSEGV), record(WorkerPhase::running, false));
        REQUIRE(failure);
        CHECK(failure->kind == RankFailure::Kind::signaled);
        CHECK(failure->signal == SIGSEGV);
    }
    SECTION("stopped by us because of another rank: no failure of its own") {
        CHECK_FALSE(classify_exit(killed_by(SIGTERM), record(WorkerPhase::terminating, false)));
        CHECK_FALSE(classify_exit(killed_by(SIGKILL), record(WorkerPhase::killed, false)));
        CHECK_FALSE(classify_exit(exited_with(1), record(WorkerPhase::terminating, false)));
    }
    SECTION("a SIGKILL we had not sent, during the grace, is its own failure") {
        const auto failure = classify_exit(killed_by(SIGKILL), record(WorkerPhase::terminating, false));
        REQUIRE(failure);
        CHECK(failure->signal == SIGKILL);
    }
    SECTION("a failure logged already is not logged twice") {
        CHECK_FALSE(classify_exit(killed_by(SIGSEGV), record(WorkerPhase::running, false, true)));
    }
    SECTION("bytes after the last whole frame are a protocol failure, even after a clean exit") {
        const auto failure = classify_exit(exited_with(0), record(WorkerPhase::running, true, false, true));
        REQUIRE(failure);
        CHECK(failure->kind == RankFailure::Kind::protocol);
    }
    SECTION("reaped by someone else: a result counts as success, no result as its own failure") {
        CHECK_FALSE(classify_exit(ExitStatus{true, false, 0}, record(WorkerPhase::running, true)));
        const auto failure = classify_exit(ExitStatus{true, false, 0}, record(WorkerPhase::running, false));
        REQUIRE(failure);
        CHECK(failure->kind == RankFailure::Kind::reaped_elsewhere);
    }
    SECTION("a remote rank's stand-in that lost its rank is lost, even while we were stopping it") {
        WorkerRecord remote = record(WorkerPhase::terminating, false);
        remote.remote = true;
        auto failure = classify_exit(exited_with(lost_rank_exit_code), remote);
        REQUIRE(failure);
        CHECK(failure->kind == RankFailure::Kind::lost);
        failure->stderr_tail = {"some line", "mpify: lost rank 3@n2: nothing came from it for 3 s (its machine)"};
        explain_lost_rank(*failure);
        CHECK(failure->message == "nothing came from it for 3 s (its machine)");
        CHECK(failure->stderr_tail == std::vector<std::string>{"some line"});
        // A local worker's exit code 75 is only an exit code.
        CHECK_FALSE(classify_exit(exited_with(lost_rank_exit_code), record(WorkerPhase::terminating, false)));
        const auto local = classify_exit(exited_with(lost_rank_exit_code), record(WorkerPhase::running, false));
        REQUIRE(local);
        CHECK(local->kind == RankFailure::Kind::exited);
    }
}

namespace {

RankFailure lost_rank(int rank) {
    RankFailure failure;
    failure.rank = rank;
    failure.kind = RankFailure::Kind::lost;
    return failure;
}

}  // namespace

TEST_CASE("with min_ranks, a lost rank's host is left out and the next attempt shrinks to what is left",
          "[supervisor]") {
    Options options;
    options.placement = Placement::by_command("run %H %C", {"a", "b", "c"}, 2);
    options.min_ranks = 2;
    // Five ranks: the caller's 0, 1-2 on a, 3-4 on b; c is spare.
    ShrinkingPlacement machines(options, 5, "call");
    CHECK(machines.ranks() == 5);
    RankFailure threw;
    threw.rank = 1;
    CHECK(machines.leave_out_lost({threw}).empty());  // a rank that threw loses no machine
    CHECK(machines.leave_out_lost({lost_rank(4), lost_rank(3)}) == std::vector<std::string>{"b"});
    CHECK(machines.placement().hosts == std::vector<std::string>{"a", "c"});
    CHECK(machines.ranks() == 5);  // the spare host steps in
    CHECK_FALSE(machines.too_small());
    CHECK(machines.leave_out_lost({lost_rank(2)}) == std::vector<std::string>{"a"});
    CHECK(machines.ranks() == 3);
    CHECK_FALSE(machines.too_small());
    CHECK(machines.leave_out_lost({lost_rank(1)}) == std::vector<std::string>{"c"});
    CHECK(machines.ranks() == 1);
    REQUIRE(machines.too_small());
    CHECK(*machines.too_small() == "the machines that answer hold 1 rank, fewer than Options::min_ranks = 2");

    SECTION("without min_ranks nothing shrinks") {
        options.min_ranks = 0;
        ShrinkingPlacement fixed(options, 5, "call");
        CHECK(fixed.leave_out_lost({lost_rank(3)}).empty());
        CHECK(fixed.ranks() == 5);
        CHECK(fixed.placement().hosts.size() == 3);
    }
    SECTION("a min_ranks above n is refused") {
        options.min_ranks = 6;
        CHECK_THROWS_AS(ShrinkingPlacement(options, 5, "call"), UsageError);
    }
}

TEST_CASE("a stop is SIGTERM, then SIGKILL once the grace has passed; SIGKILL at once without grace", "[supervisor]") {
    const Clock::time_point now = Clock::now();
    const StopPlan::Step graceful = StopPlan{250ms}.begin(now);
    CHECK(graceful.signal == SIGTERM);
    CHECK(graceful.phase == WorkerPhase::terminating);
    CHECK(graceful.next_step_due == now + 250ms);
    const StopPlan::Step kill = StopPlan::escalate(now + 250ms);
    CHECK(kill.signal == SIGKILL);
    CHECK(kill.phase == WorkerPhase::killed);
    for (const auto grace : {0ms, -5ms}) {
        const StopPlan::Step at_once = StopPlan{grace}.begin(now);
        CHECK(at_once.signal == SIGKILL);
        CHECK(at_once.phase == WorkerPhase::killed);
    }
}

namespace {

RankFailure failure_of(int rank, RankFailure::Kind kind) {
    RankFailure f;
    f.rank = rank;
    f.kind = kind;
    return f;
}

// The ranks, in order, of the failures in what `log` throws (a WorkerError).
std::vector<int> thrown_ranks(FailureLog& log) {
    try {
        log.throw_if_failed("test");
    } catch (const WorkerError& e) {
        std::vector<int> ranks;
        for (const RankFailure& f : e.failures()) ranks.push_back(f.rank);
        return ranks;
    }
    FAIL("no WorkerError");
    return {};
}

}  // namespace

TEST_CASE("the failure log puts the cause first", "[supervisor]") {
    const Clock::time_point t0 = Clock::now();
    SECTION("an exception before another: in the order they happened, not the order they were logged") {
        FailureLog log;
        log.add(failure_of(2, RankFailure::Kind::threw), t0 + 100ms);
        log.add(failure_of(1, RankFailure::Kind::threw), t0);
        CHECK(thrown_ranks(log) == std::vector<int>{1, 2});
    }
    SECTION("a death noticed at its reap counts as earlier than its peers' broken collectives") {
        FailureLog log;
        log.add(failure_of(1, RankFailure::Kind::threw), t0);
        log.add(failure_of(3, RankFailure::Kind::signaled), t0 + 300ms);
        CHECK(thrown_ranks(log) == std::vector<int>{3, 1});
    }
    SECTION("the caller's own exception, first, propagates unchanged") {
        FailureLog log;
        log.caller_threw(0, std::make_exception_ptr(std::logic_error("mine")), t0);
        log.add(failure_of(1, RankFailure::Kind::threw), t0 + 50ms);
        CHECK_THROWS_AS(log.throw_if_failed("test"), std::logic_error);
    }
    SECTION("the caller's exception after a worker's is listed at its time") {
        FailureLog log;
        log.add(failure_of(1, RankFailure::Kind::threw), t0);
        log.caller_threw(0, std::make_exception_ptr(std::logic_error("mine")), t0 + 50ms);
        CHECK(thrown_ranks(log) == std::vector<int>{1, 0});
    }
    SECTION("a timeout is a TimeoutError; an interrupt comes before everything") {
        FailureLog timed;
        timed.add(failure_of(1, RankFailure::Kind::timed_out), t0);
        timed.mark_timed_out();
        CHECK_THROWS_AS(timed.throw_if_failed("test"), TimeoutError);
        timed.mark_interrupted();
        CHECK_THROWS_AS(timed.throw_if_failed("test"), Interrupted);
    }
    SECTION("nothing failed: nothing is thrown") {
        FailureLog log;
        CHECK_NOTHROW(log.throw_if_failed("test"));
    }
}

namespace {

// Lines an OutputRelay hands to Options::on_output.
struct Collected {
    Options options;
    std::vector<std::string> lines;
    Collected() {
        options.on_output = [this](int rank, Stream, const std::string& line) {
            lines.push_back(std::to_string(rank) + ":" + line);
        };
    }
};

}  // namespace

TEST_CASE("the output relay hands on whole lines, the last one at the stream's end", "[supervisor]") {
    Collected collected;
    CallerStreams caller;
    OutputRelay relay(collected.options, caller, 4, "", Stream::err);
    const std::string bytes = "first\nsec";
    relay.feed(bytes.data(), bytes.size());
    CHECK(collected.lines == std::vector<std::string>{"4:first"});
    const std::string more = "ond\n\nno newline";
    relay.feed(more.data(), more.size());
    CHECK(collected.lines == std::vector<std::string>{"4:first", "4:second", "4:"});
    relay.finish();
    CHECK(collected.lines == std::vector<std::string>{"4:first", "4:second", "4:", "4:no newline"});
    CHECK(relay.tail() == std::vector<std::string>{"first", "second", "", "no newline"});
    relay.stop_forwarding();
    const std::string after = "kept for the tail only\n";
    relay.feed(after.data(), after.size());
    CHECK(collected.lines.size() == 4);
    CHECK(relay.tail().back() == "kept for the tail only");
}

TEST_CASE("a line redrawn with a carriage return is shown live; on_output gets whole lines", "[supervisor]") {
    Collected collected;
    CallerStreams caller;
    OutputRelay relay(collected.options, caller, 1, "", Stream::out);
    const std::string bytes = "10%\r20%\r30%\ndone\r\n";
    relay.feed(bytes.data(), bytes.size() - 1);  // "\r" last: it may still become "\r\n"
    CHECK(collected.lines == std::vector<std::string>{"1:30%"});
    relay.feed(bytes.data() + bytes.size() - 1, 1);
    CHECK(collected.lines == std::vector<std::string>{"1:30%", "1:done"});
    const std::string redrawn = "a\rb\r";
    relay.feed(redrawn.data(), redrawn.size());
    relay.finish();  // a last redraw without its newline is the last line
    CHECK(collected.lines == std::vector<std::string>{"1:30%", "1:done", "1:b"});
}

TEST_CASE("the output relay hands on long lines whole and never splits a CRLF", "[supervisor]") {
    Collected collected;
    CallerStreams caller;
    OutputRelay relay(collected.options, caller, 2, "", Stream::out);
    // A 100,000-character line arriving as a pipe hands it over: 65,536 bytes, then the rest.
    const std::string line(100000, 'x');
    relay.feed(line.data(), 65536);
    relay.feed(line.data() + 65536, line.size() - 65536);
    CHECK(collected.lines.empty());
    relay.feed("\n", 1);
    REQUIRE(collected.lines.size() == 1);
    CHECK(collected.lines[0] == "2:" + line);
    // A "\r\n" whose '\r' ends one read and whose '\n' starts the next: one line, no '\r'.
    const std::string crlf = std::string(65535, 'y') + "\r";
    relay.feed(crlf.data(), crlf.size());
    relay.feed("\nnext\n", 6);
    REQUIRE(collected.lines.size() == 3);
    CHECK(collected.lines[1] == "2:" + std::string(65535, 'y'));
    CHECK(collected.lines[2] == "2:next");
}

TEST_CASE("a line longer than 1 MiB is cut there, with a mark, and the next line is whole", "[supervisor]") {
    Collected collected;
    CallerStreams caller;
    OutputRelay relay(collected.options, caller, 0, "", Stream::err);
    const std::string chunk(64 * 1024, 'z');
    for (int i = 0; i < 40; ++i) relay.feed(chunk.data(), chunk.size());  // 2.5 MiB, no newline yet
    CHECK(collected.lines.empty());
    relay.feed("\r\nafter\n", 9);
    REQUIRE(collected.lines.size() == 2);
    const std::string cut = collected.lines[0];
    CHECK(cut.size() < 2 + (1 << 20) + 100);
    CHECK(cut.compare(0, 2 + (1 << 20), "0:" + std::string(1 << 20, 'z')) == 0);
    CHECK_THAT(cut, Catch::EndsWith("[... cut by mpify: the line was longer than 1 MiB]"));
    CHECK(collected.lines[1] == "0:after");
    CHECK(relay.tail().front().size() <= 64 * 1024);  // a crash report keeps less of it
    // Cut, then the stream ends before the line does.
    for (int i = 0; i < 20; ++i) relay.feed(chunk.data(), chunk.size());
    relay.finish();
    REQUIRE(collected.lines.size() == 3);
    CHECK_THAT(collected.lines[2], Catch::EndsWith("longer than 1 MiB]"));
}

TEST_CASE("output_ranks and output_prefix choose whose lines go to the caller's streams and how they begin",
          "[supervisor]") {
    std::ostringstream captured;
    std::streambuf* const was = std::cout.rdbuf(captured.rdbuf());  // CallerStreams then writes to std::cout
    {
        Options options;
        options.output_ranks = {1};
        options.output_prefix = "{rank}@{host}| ";
        CallerStreams caller;
        OutputRelay shown(options, caller, 1, "n2", Stream::out);
        OutputRelay hidden(options, caller, 2, "", Stream::out);
        const std::string bytes = "step 1\rstep 2\nlast\n";
        shown.feed(bytes.data(), bytes.size());
        hidden.feed(bytes.data(), bytes.size());
        caller.drain(std::nullopt, [] { return false; });
    }
    std::cout.rdbuf(was);
    CHECK(captured.str() == "1@n2| step 1\r1@n2| step 2\n1@n2| last\n");
}

namespace {

// A child of this process that plays a worker: `body` runs in it with its end of the
// channel and its stdout, then it exits with what body returns.
StartedWorker fork_worker(const std::function<int(int channel, int out)>& body) {
    int channel[2], out[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) == 0);
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // A fresh process's dispositions, not Catch's handlers (which would report the
        // stop as this test's failure from inside the child).
        for (const int signal : {SIGTERM, SIGINT, SIGSEGV, SIGABRT, SIGILL, SIGFPE}) ::signal(signal, SIG_DFL);
        ::close(channel[0]);
        ::close(out[0]);
        ::_exit(body(channel[1], out[1]));
    }
    ::close(channel[1]);
    ::close(out[1]);
    StartedWorker worker;
    worker.process = adopt_child(pid);
    worker.channel.reset(channel[0]);
    worker.out.reset(out[0]);
    return worker;
}

// Reads the call the supervisor sends (head and arguments) to its end.
void read_call(int channel, std::size_t size) {
    std::string bytes(size, '\0');
    for (std::size_t got = 0; got < size;) {
        const ssize_t n = ::read(channel, bytes.data() + got, size - got);
        if (n <= 0) ::_exit(90);
        got += static_cast<std::size_t>(n);
    }
}

struct SupervisedCall {
    Options options;
    FailureLog failures;
    InterruptWatch interrupts;
    std::vector<std::string> lines;
    SupervisedCall() {
        options.stop_grace = 100ms;
        options.on_output = [this](int rank, Stream, const std::string& line) {
            lines.push_back(std::to_string(rank) + ":" + line);
        };
    }
};

const std::string call_head = "call head";
const auto no_args = std::make_shared<const std::string>("args");

// A worker's body: takes the call, then runs until a signal ends it.
int take_the_call_and_run_on(int channel) {
    read_call(channel, call_head.size() + no_args->size());
    for (;;) ::pause();
}

// The one failure in what `log` throws, which must be an E.
template <class E>
RankFailure only_failure(FailureLog& log) {
    try {
        log.throw_if_failed("test");
    } catch (const E& e) {
        REQUIRE(e.failures().size() == 1);
        return e.failures().front();
    }
    FAIL("nothing, or not the expected error, was thrown");
    return {};
}

}  // namespace

TEST_CASE("the supervisor sends the call, takes the result and the output's last partial line", "[supervisor]") {
    SupervisedCall call;
    {
        Supervisor supervisor(call.options, std::nullopt, call.failures, call.interrupts);
        supervisor.add(1, fork_worker([](int channel, int out) -> int {
                           read_call(channel, call_head.size() + no_args->size());
                           (void)!::write(out, "line\npartial", 12);
                           write_frame(channel, FrameType::result, "the result");
                           return 0;
                       }),
                       call_head, no_args);
        supervisor.run();
        CHECK(supervisor.take_result(1) == std::optional<std::string>("the result"));
    }
    CHECK_NOTHROW(call.failures.throw_if_failed("test"));
    CHECK(call.lines == std::vector<std::string>{"1:line", "1:partial"});
}

TEST_CASE("a worker's failure stops the others: one that ignores SIGTERM is killed after the grace, and is no "
          "failure of its own",
          "[supervisor]") {
    SupervisedCall call;
    const Clock::time_point started = Clock::now();
    {
        Supervisor supervisor(call.options, std::nullopt, call.failures, call.interrupts);
        supervisor.add(1, fork_worker([](int channel, int) -> int {
                           ::signal(SIGTERM, SIG_IGN);  // only SIGKILL ends it
                           return take_the_call_and_run_on(channel);
                       }),
                       call_head, no_args);
        supervisor.add(2, fork_worker([](int channel, int) -> int {
                           read_call(channel, call_head.size() + no_args->size());
                           return 5;
                       }),
                       call_head, no_args);
        supervisor.run();  // returns once both are reaped
    }
    CHECK(Clock::now() - started >= call.options.stop_grace);
    const RankFailure failure = only_failure<WorkerError>(call.failures);
    CHECK(failure.rank == 2);
    CHECK(failure.kind == RankFailure::Kind::exited);
    CHECK(failure.exit_code == 5);
}

TEST_CASE("the supervisor's deadline stops a worker that runs too long and names it", "[supervisor]") {
    SupervisedCall call;
    {
        Supervisor supervisor(call.options, Clock::now() + 50ms, call.failures, call.interrupts);
        supervisor.add(3, fork_worker([](int channel, int) { return take_the_call_and_run_on(channel); }), call_head,
                       no_args);
        supervisor.run();
    }
    const RankFailure failure = only_failure<TimeoutError>(call.failures);
    CHECK(failure.rank == 3);
    CHECK(failure.kind == RankFailure::Kind::timed_out);
}
