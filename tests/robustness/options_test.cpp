// Options at their edges (an output callback that throws, a timeout too large for the
// clock) and the environment at its edges (mpify's variables set by hand).
#include "functions.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

TEST_CASE("an output callback that throws fails the call with its message", "[robustness][failure]") {
    mpify::Options options;
    options.on_output = [](int, mpify::Stream, const std::string& line) {
        throw std::runtime_error("the log is full (at '" + line + "')");
    };
    // A void function: nothing but the error can tell the caller that the run was cut short.
    try {
        mpify::ranch(options, 2, in_library::print_lines, 3);
        FAIL("ranch returned");
    } catch (const mpify::Error& e) {
        CHECK_THAT(e.what(), Catch::Contains("Options::on_output threw on a line of rank 1's"));
        CHECK_THAT(e.what(), Catch::Contains("std::runtime_error: the log is full"));
        CHECK_THROWS_AS(std::rethrow_if_nested(e), std::runtime_error);  // the original, nested
    }
    // And one with a result, whose workers would never end by themselves: they are
    // stopped, and no result of a stopped worker is decoded.
    mpify::Options workers_only = options;
    workers_only.caller_rank = std::nullopt;
    CHECK_THROWS_WITH(mpify::ranch(workers_only, 2, in_library::hang_on_workers, 5),
                      Catch::Contains("Options::on_output threw"));
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("an output callback that throws is never a reason to restart the call", "[robustness][failure]") {
    int calls = 0;
    mpify::Options options;
    options.restarts = 2;
    options.on_output = [&calls](int, mpify::Stream, const std::string&) {
        ++calls;
        throw std::runtime_error("the log is full");
    };
    for (const std::optional<int>& caller_rank : {std::optional<int>(0), std::optional<int>()}) {
        calls = 0;
        options.caller_rank = caller_rank;
        try {
            mpify::ranch(options, 2, in_library::print_lines, 3);
            FAIL("ranch returned");
        } catch (const mpify::WorkerError& e) {
            FAIL("the callback's failure was taken for a rank's: " << e.what());
        } catch (const mpify::Error& e) {
            CHECK_THAT(e.what(), Catch::Contains("Options::on_output threw on a line of rank"));
            CHECK_THROWS_AS(std::rethrow_if_nested(e), std::runtime_error);
        }
        CHECK(calls == 1);  // one attempt: a restart would have called it again
    }
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a timeout too large for the clock means no timeout", "[robustness]") {
    mpify::Options options;
    options.timeout = std::chrono::milliseconds::max();
    CHECK(mpify::ranch(options, 2, in_library::add, 1, 2) == std::vector<int>{3, 4});
    options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::hours(24 * 365 * 1000));
    CHECK(mpify::ranch(options, 2, in_library::add, 1, 2) == std::vector<int>{3, 4});
}

namespace {

// Runs this test program with `variables` set (and fd 3 a plain file), as a user whose
// shell exported them would; returns what it printed and its exit status.
std::string run_self_with(const std::string& variables) {
    const std::string command = variables + " /proc/" + std::to_string(::getpid()) +
                                "/exe --list-test-names-only 3</dev/null 2>&1; echo \"exit=$?\"";
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string output;
    char buffer[4096];
    while (std::size_t got = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, got);
    ::pclose(pipe);
    return output;
}

}  // namespace

TEST_CASE("a program started with mpify's variables but without its channel says so", "[robustness]") {
    const std::string worker = run_self_with("MPIFY_WORKER_FD=3");
    CHECK_THAT(worker, Catch::Contains("started as an mpify worker (MPIFY_WORKER_FD=3)") &&
                           Catch::Contains("not mpify's channel") && Catch::Contains("unset MPIFY_WORKER_FD") &&
                           Catch::EndsWith("exit=70\n"));
    const std::string template_ = run_self_with("MPIFY_TEMPLATE_FD=three");
    CHECK_THAT(template_, Catch::Contains("started as an mpify warm template (MPIFY_TEMPLATE_FD=three)") &&
                              Catch::Contains("not a file descriptor number") && Catch::EndsWith("exit=70\n"));
}

// Run by the next test in a copy of this program whose fds 0, 1 and 2 are closed.
TEST_CASE("calls with the standard fds closed", "[.closed_standard_fds]") {
    for (int call = 0; call < 5; ++call) {
        CHECK_NOTHROW(mpify::ranch(3, in_library::print_lines, 4));  // every rank prints to stdout and stderr
        CHECK(mpify::ranch(2, in_library::add, 1, call) == std::vector<int>{1 + call, 2 + call});
    }
}

TEST_CASE("a caller started with fds 0, 1 and 2 closed works", "[robustness]") {
    const std::string command =
        "(/proc/" + std::to_string(::getpid()) + "/exe \"[.closed_standard_fds]\" <&- >&- 2>&-); echo \"exit=$?\"";
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[256] = {};
    const std::size_t got = std::fread(buffer, 1, sizeof buffer - 1, pipe);
    ::pclose(pipe);
    CHECK(std::string(buffer, got) == "exit=0\n");  // Catch's status: no failed test
}
