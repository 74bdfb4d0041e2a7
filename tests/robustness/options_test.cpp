// Options at their edges: an output callback that throws, a timeout too large for the clock.
#include "functions.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <stdexcept>

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

TEST_CASE("a timeout too large for the clock means no timeout", "[robustness]") {
    mpify::Options options;
    options.timeout = std::chrono::milliseconds::max();
    CHECK(mpify::ranch(options, 2, in_library::add, 1, 2) == std::vector<int>{3, 4});
    options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::hours(24 * 365 * 1000));
    CHECK(mpify::ranch(options, 2, in_library::add, 1, 2) == std::vector<int>{3, 4});
}
