// Stopping a running call from outside: mpify::request_interrupt() and stop_on_sigint().
#include "ddp_functions.hpp"
#include "functions.hpp"
#include "support.hpp"

#include <mpify/ddp.hpp>

#include <catch2/catch.hpp>

#include <signal.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <string>

namespace {

// Options whose output callback calls `act` once, when `rank` says "waiting" or prints
// its marker: the worker is running by then.
mpify::Options act_when_running(int rank, void (*act)()) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    mpify::Options options;
    options.on_output = [rank, act, done](int from, mpify::Stream, const std::string&) {
        if (from == rank && !done->exchange(true)) act();
    };
    return options;
}

}  // namespace

TEST_CASE("request_interrupt stops every worker and ranch throws Interrupted", "[robustness][interrupt]") {
    mpify::Options options = act_when_running(2, [] { mpify::request_interrupt(); });
    options.caller_rank = std::nullopt;  // only workers, which never end by themselves
    try {
        mpify::ranch(options, 3, in_library::hang_on_workers, 7);
        FAIL("ranch returned");
    } catch (const mpify::Interrupted& e) {
        CHECK_THAT(e.what(), Catch::Contains("interrupted"));
        CHECK_NOTHROW(std::rethrow_if_nested(e));  // nothing else failed
    }
    CHECK(mpify_test::has_no_children());
    // The interrupt was for that call only: the next one runs.
    CHECK(mpify::ranch(2, in_library::add, 1, 2) == std::vector<int>{3, 4});
}

TEST_CASE("the caller's rank sees interrupt_requested() and the call is interrupted", "[robustness][interrupt]") {
    CHECK_FALSE(mpify::interrupt_requested());  // outside a call
    const mpify::Options options = act_when_running(1, [] { mpify::request_interrupt(); });
    try {
        mpify::ranch(options, 2, in_library::wait_for_interrupt, 60);
        FAIL("ranch returned");
    } catch (const mpify::Interrupted& e) {
        CHECK_NOTHROW(std::rethrow_if_nested(e));  // rank 0 saw the interrupt: it did not throw
    }
    CHECK(mpify_test::has_no_children());
    CHECK_FALSE(mpify::interrupt_requested());
}

TEST_CASE("an interrupt reaches the caller's rank waiting at a group's rendezvous", "[robustness][interrupt][ddp]") {
    // Rank 2 of 3 never comes: ranks 0 (the caller, hosting the store) and 1 would wait a
    // minute for it. Rank 1 says "joining" as it starts to; the interrupt comes then.
    const int port = mpify_test::free_loopback_port();
    mpify::Options options = act_when_running(1, [] { mpify::request_interrupt(); });
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(mpify::ranch(options, 2, ddp_test::join_group_of, 3, port), mpify::Interrupted);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("an interrupt reaches the caller's rank waiting in a collective for a rank that never comes",
          "[robustness][interrupt][ddp]") {
    // Rank 1 never posts its receive: rank 0's all-reduce waits. Gloo would hold it for
    // the group's timeout (a minute here) after rank 1 is stopped; the interrupt ends it.
    mpify::Options options = act_when_running(1, [] { mpify::request_interrupt(); });
    mpify::DdpOptions group;
    group.timeout = std::chrono::minutes(1);
    const auto start = std::chrono::steady_clock::now();
    try {
        mpify::in_ddp(group, options, 2, ddp_test::all_reduce_beside_a_silent_rank, 1);
        FAIL("in_ddp returned");
    } catch (const mpify::Interrupted& e) {
        CHECK_THAT(e.what(), Catch::Contains("interrupted"));
    }
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
    CHECK(mpify_test::has_no_children());
    CHECK_FALSE(mpify::ddp::active());  // the guard ended (its group let go)
    CHECK(mpify::in_ddp(2, ddp_test::allreduce_rank) == 1);  // the next group forms and works
}

TEST_CASE("an interrupt while no call runs changes nothing", "[robustness][interrupt]") {
    mpify::request_interrupt();
    CHECK(mpify::ranch(2, in_library::add, 1, 2) == std::vector<int>{3, 4});
}

TEST_CASE("after stop_on_sigint, SIGINT during a call interrupts it", "[robustness][interrupt]") {
    mpify::stop_on_sigint();
    mpify::Options options = act_when_running(1, [] { ::raise(SIGINT); });
    options.caller_rank = std::nullopt;
    CHECK_THROWS_AS(mpify::ranch(options, 2, in_library::hang_on_workers, 3), mpify::Interrupted);
    CHECK(mpify_test::has_no_children());
    ::signal(SIGINT, SIG_DFL);
}
