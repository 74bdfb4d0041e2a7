// Chaos: a DDP training where a random rank is SIGKILLed at a random step. Whatever the
// rank and the moment, the call names the killed rank first, ends within the timeout,
// and leaves nothing behind.
#include "ddp_functions.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <random>

TEST_CASE("a random rank killed at a random step of training is named first, every time",
          "[robustness][ddp][failure][chaos][once]") {
    mpify::DdpOptions ddp;
    ddp.timeout = std::chrono::seconds(10);
    const mpify::Options options = mpify_test::quiet();
    // One training without a death first: lazy initializations (the warm template, Gloo)
    // happen there, not in the runs that must leave nothing behind.
    CHECK(mpify::in_ddp(ddp, options, 3, ddp_test::train_until_killed, -1, 0) == 0);
    const int fds_before = mpify_test::open_fd_count();
    std::mt19937 random(20261123);  // fixed: a failing run can be replayed
    for (int run = 0; run < 20; ++run) {
        // Rank 0 is this process (in_ddp's caller): one of the workers dies, and rank 0's
        // collective breaks with the other's.
        const int dying_rank = std::uniform_int_distribution<int>(1, 2)(random);
        const int dying_step = std::uniform_int_distribution<int>(0, 9)(random);
        INFO("run " << run << ": rank " << dying_rank << " killed at step " << dying_step);
        const auto start = std::chrono::steady_clock::now();
        try {
            mpify::in_ddp(ddp, options, 3, ddp_test::train_until_killed, dying_rank, dying_step);
            FAIL("in_ddp returned");
        } catch (const mpify::WorkerError& e) {
            REQUIRE_FALSE(e.failures().empty());
            CHECK(e.failures().front().rank == dying_rank);
            CHECK(e.failures().front().kind == mpify::RankFailure::Kind::signaled);
            CHECK(e.failures().front().signal == SIGKILL);
        }
        CHECK(std::chrono::steady_clock::now() - start < ddp.timeout + std::chrono::seconds(2));
        CHECK(mpify_test::has_no_children());
    }
    CHECK(mpify_test::open_fd_count() == fds_before);
}
