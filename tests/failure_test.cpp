// Failures: each ends promptly with one error that names the rank, what happened, and
// leaves no process behind.
#include "functions.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <stdexcept>

#include <sys/stat.h>

using Catch::Contains;
using Kind = mpify::RankFailure::Kind;

namespace {
mpify::Options crashing() {
    mpify::Options options = mpify_test::quiet();
    mpify_test::let_crashes_through(options);
    return options;
}
}  // namespace

TEST_CASE("a worker that throws fails the call with its rank exception type and message", "[failure]") {
    for (auto fn : {in_program::throw_on, in_library::throw_on}) {
        try {
            mpify::ranch(mpify_test::quiet(), 3, fn, 1);
            FAIL("ranch returned");
        } catch (const mpify::WorkerError& e) {
            CHECK_THAT(e.what(), Contains("rank 1 threw std::invalid_argument: bad value on rank 1"));
            REQUIRE(e.failures().size() == 1);
            CHECK(e.failures()[0].rank == 1);
            CHECK(e.failures()[0].kind == Kind::threw);
            CHECK(e.failures()[0].exception_type == "std::invalid_argument");
        }
        CHECK(mpify_test::has_no_children());
    }
}

TEST_CASE("what a worker says reaches the caller's error with its control characters written out", "[failure]") {
    // Escape sequences (colour, a title, clearing the screen), a bell and a C1 CSI: a terminal
    // or a notebook showing the error would obey them.
    const std::string hostile = "red \x1b[31mALERT\x1b]0;title\x07 \x1b[2J\r gone \xc2\x9b"
                                "1m";
    mpify::Options options = mpify_test::quiet();
    options.restarts = 1;  // the restart's line on stderr too
    try {
        mpify::ranch(options, 2, in_library::say_and_throw_on, 1, hostile);
        FAIL("ranch returned");
    } catch (const mpify::WorkerError& e) {
        const std::string what = e.what();
        CHECK_THAT(what, Contains("red \\x1b[31mALERT\\x1b]0;title\\x07 \\x1b[2J\\x0d gone \\u009b1m"));
        CHECK(std::all_of(what.begin(), what.end(),
                          [](char c) { return static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t'; }));
        CHECK(what.find("\xc2\x9b") == std::string::npos);
        // The failure itself keeps what the rank said, as it said it.
        REQUIRE(!e.failures().empty());
        CHECK(e.failures().back().message == hostile);
    }
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a rank that failed twice counts once among the ranks that failed", "[failure]") {
    std::vector<mpify::RankFailure> failures(3);
    failures[0].rank = 0;
    failures[0].kind = Kind::timed_out;
    failures[1].rank = 1;
    failures[1].kind = Kind::timed_out;
    failures[2].rank = 0;  // the caller's rank, which then threw on the way out
    failures[2].exception_type = "mpify::Error";
    const mpify::WorkerError e("mpify::ranch(f, n=2)", failures);
    CHECK_THAT(e.what(), Contains("2 ranks failed, 3 failures in all; the first failure is listed first"));
    failures.pop_back();
    CHECK_THAT(mpify::WorkerError("mpify::ranch(f, n=2)", failures).what(), Contains("2 ranks failed; the first"));
}

TEST_CASE("a worker that throws a non-std exception is reported with its type", "[failure]") {
    mpify::Options options = mpify_test::quiet();
    options.caller_rank = std::nullopt;
    REQUIRE_THROWS_WITH(mpify::ranch(options, 2, in_library::throw_int_on, 0), Contains("rank 0 threw int"));
}

TEST_CASE("a worker that throws stops the other hanging workers", "[failure]") {
    // rank 1 throws while ranks 0 and 2 (workers too) would wait forever: the call ends.
    mpify::Options options = mpify_test::quiet();
    options.caller_rank = std::nullopt;
    options.stop_grace = std::chrono::milliseconds(200);
    try {
        mpify::ranch(options, 3, in_program::fail_or_hang, 1);
        FAIL("ranch returned");
    } catch (const mpify::WorkerError& e) {
        REQUIRE(e.failures().size() == 1);  // the stopped ranks are not failures of their own
        CHECK(e.failures()[0].rank == 1);
    }
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a crash is reported with the signal name and the last lines of stderr", "[failure]") {
    struct Case {
        const char* how;
        const char* expected;
    };
    for (const Case c : {Case{"segv", "rank 2 was killed by SIGSEGV"}, Case{"abort", "rank 2 was killed by SIGABRT"},
                         Case{"exit3", "rank 2 exited with code 3"},
                         Case{"exit0", "rank 2 exited with code 0 before returning a result"}}) {
        INFO(c.how);
        try {
            mpify::ranch(crashing(), 3, in_library::crash_on, 2, std::string(c.how));
            FAIL("ranch returned");
        } catch (const mpify::WorkerError& e) {
            CHECK_THAT(e.what(), Contains(c.expected));
            CHECK_THAT(e.what(), Contains(std::string("rank 2 is about to ") + c.how));
            REQUIRE(e.failures().size() == 1);
            CHECK(e.failures()[0].stderr_tail.back() == std::string("rank 2 is about to ") + c.how);
        }
        CHECK(mpify_test::has_no_children());
    }
}

TEST_CASE("the caller's own exception propagates after the workers are stopped and reaped", "[failure]") {
    // The caller is rank 0 and throws; ranks 1 and 2 would wait forever.
    mpify::Options options = mpify_test::quiet();
    options.stop_grace = std::chrono::milliseconds(200);
    REQUIRE_THROWS_AS(mpify::ranch(options, 3, in_library::fail_or_hang, 0), std::invalid_argument);
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a worker's failure is reported before the caller's exception it caused", "[failure]") {
    mpify_test::TempDir dir;
    const std::string fifo = dir.path() + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    try {
        mpify::ranch(mpify_test::quiet(), 2, in_library::root_cause_then_peer, fifo);
        FAIL("ranch returned");
    } catch (const mpify::WorkerError& e) {
        REQUIRE(e.failures().size() == 2);
        CHECK(e.failures()[0].rank == 1);
        CHECK(e.failures()[0].message == "the root cause");
        CHECK(e.failures()[1].rank == 0);
        CHECK(e.failures()[1].message == "peer went away");
    }
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a timeout stops every worker and names the ranks still running", "[failure][timeout]") {
    mpify::Options options = mpify_test::quiet();
    options.caller_rank = std::nullopt;
    options.timeout = std::chrono::milliseconds(1500);
    options.stop_grace = std::chrono::milliseconds(100);
    mpify_test::warm_up(options, 2, in_library::add, 1, 2);
    try {
        mpify::ranch(options, 2, in_library::hang_on_workers, 1);
        FAIL("ranch returned");
    } catch (const mpify::TimeoutError& e) {
        CHECK_THAT(e.what(), Contains("rank 0 timed out"));
        CHECK_THAT(e.what(), Contains("rank 1 timed out"));
        CHECK(e.failures().size() == 2);
    }
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("what a rank started ends with it: after a timeout, a failure and a return", "[failure]") {
    // Each worker starts `sleep 30` (a shell command, a data loader's process) and then
    // hangs until the timeout, throws, or returns.
    for (int how : {0, 1, 2}) {
        CAPTURE(how);
        auto children = std::make_shared<std::vector<pid_t>>();
        mpify::Options options = mpify_test::quiet();
        options.caller_rank = std::nullopt;
        options.stop_grace = std::chrono::milliseconds(200);
        if (how == 0) options.timeout = std::chrono::seconds(3);
        // With no rank of its own, the caller supervises on this thread: no lock needed.
        options.on_output = [children](int, mpify::Stream, const std::string& line) {
            if (line.rfind("child ", 0) == 0) children->push_back(static_cast<pid_t>(std::stol(line.substr(6))));
        };
        try {
            mpify::ranch(options, 2, in_library::start_a_sleep_then, how);
            CHECK(how == 2);
        } catch (const mpify::Error&) {
            CHECK(how != 2);
        }
        // After a failure the other rank may be stopped before it started its child.
        REQUIRE(children->size() >= (how == 1 ? 1u : 2u));
        for (pid_t pid : *children) CHECK(mpify_test::wait_for_exit(pid, 2000));
        CHECK(mpify_test::has_no_children());
    }
}
