// A peer that dies while Gloo writes to it must fail the collective, not kill the writer
// (in a notebook, the kernel) with SIGPIPE.
#include "ddp_functions.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <pthread.h>
#include <signal.h>

namespace {

bool sigpipe_blocked_here() {
    sigset_t mask;
    pthread_sigmask(SIG_SETMASK, nullptr, &mask);
    return sigismember(&mask, SIGPIPE) == 1;
}

}  // namespace

TEST_CASE("inside a group, writes to a broken pipe fail with EPIPE on every rank and thread", "[robustness][ddp]") {
    REQUIRE_FALSE(sigpipe_blocked_here());
    CHECK(mpify::in_ddp(2, ddp_test::broken_pipe_writes_fail_with_epipe));
    // The caller's thread has SIGPIPE as before the call.
    CHECK_FALSE(sigpipe_blocked_here());
}

TEST_CASE("a rank killed during large all-reduces fails the call without a SIGPIPE in the caller",
          "[robustness][ddp][failure]") {
    mpify::DdpOptions options;
    options.backend = mpify::Backend::gloo;  // sockets to write to (the default on one machine has none)
    options.timeout = std::chrono::seconds(20);
    for (int i = 0; i < 3; ++i) {
        INFO("call " << i);
        // Reaching the catch at all is the point: a SIGPIPE would have ended this process.
        // And the killed rank is the cause, before rank 0's broken collective.
        try {
            mpify::in_ddp(options, mpify_test::quiet(), 2, ddp_test::die_during_large_allreduces, 1);
            FAIL("in_ddp returned");
        } catch (const mpify::WorkerError& e) {
            REQUIRE_FALSE(e.failures().empty());
            CHECK(e.failures().front().rank == 1);
            CHECK(e.failures().front().kind == mpify::RankFailure::Kind::signaled);
            CHECK(e.failures().front().signal == SIGKILL);
        }
    }
    CHECK_FALSE(sigpipe_blocked_here());
    CHECK(mpify_test::has_no_children());
}
