// Options::restarts: a failed call runs again, whole, and every rank knows which attempt
// it runs; what a retry cannot mend is never retried; when restarts run out, the error
// lists every attempt's failures in order.
#include "ddp_functions.hpp"
#include "functions.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <stdexcept>

using Catch::Contains;
using Kind = mpify::RankFailure::Kind;

namespace {

mpify::Options restarting(int restarts) {
    mpify::Options options = mpify_test::quiet();
    mpify_test::let_crashes_through(options);
    options.restarts = restarts;
    return options;
}

// What the calling thread writes to std::cerr while it exists (the restart notices).
class CapturedStderr {
public:
    CapturedStderr() : old_(std::cerr.rdbuf(text_.rdbuf())) {}
    ~CapturedStderr() { std::cerr.rdbuf(old_); }
    std::string text() const { return text_.str(); }

private:
    std::ostringstream text_;
    std::streambuf* old_;
};

}  // namespace

TEST_CASE("restart_count is 0 outside a call and in every rank of a call without restarts", "[restart]") {
    CHECK(mpify::restart_count() == 0);
    CHECK(mpify::ranch(3, in_library::fail_before_restart, -1, 0, std::string("throw")) == std::vector<int>{0, 1, 2});
    CHECK(mpify::restart_count() == 0);
    // Exported by hand (or left by a parent), the variable is not mpify's outside a call.
    ::setenv("MPIFY_RESTART_COUNT", "3", 1);
    CHECK(mpify::restart_count() == 0);
    ::unsetenv("MPIFY_RESTART_COUNT");
}

TEST_CASE("a worker killed on the first attempt: the call restarts and every rank knows it", "[restart]") {
    for (auto fn : {in_program::fail_before_restart, in_library::fail_before_restart}) {
        CapturedStderr err;
        CHECK(mpify::ranch(restarting(2), 3, fn, 1, 1, std::string("kill")) == std::vector<int>{10, 11, 12});
        CHECK_THAT(err.text(),
                   Contains("mpify: rank 1 was killed by SIGKILL") && Contains("restart 1 of 2 on 3 ranks"));
        CHECK(mpify_test::has_no_children());
    }
}

TEST_CASE("the caller's own rank throws once: the call restarts and returns", "[restart]") {
    CapturedStderr err;
    CHECK(mpify::ranch(restarting(1), 2, in_library::fail_before_restart, 0, 1, std::string("throw")) ==
          std::vector<int>{10, 11});
    CHECK_THAT(err.text(), Contains("mpify: rank 0 threw std::runtime_error: failing on attempt 0; restart 1 of 1"));
}

TEST_CASE("a rank that fails every attempt: the error lists each attempt's failure in order", "[restart]") {
    CapturedStderr err;
    try {
        mpify::ranch(restarting(2), 2, in_library::fail_before_restart, 1, 99, std::string("exit3"));
        FAIL("ranch returned");
    } catch (const mpify::WorkerError& e) {
        CHECK_THAT(e.what(), Contains("failed on each of its 3 attempts (Options::restarts = 2)"));
        CHECK_THAT(e.what(), Contains("\nattempt 1: rank 1 exited with code 3"));
        CHECK_THAT(e.what(), Contains("\nattempt 2 (restart 1): rank 1 exited with code 3"));
        CHECK_THAT(e.what(), Contains("\nattempt 3 (restart 2): rank 1 exited with code 3"));
        REQUIRE(e.failures().size() == 3);
        for (int attempt = 0; attempt < 3; ++attempt) {
            CHECK(e.failures()[attempt].attempt == attempt);
            CHECK(e.failures()[attempt].kind == Kind::exited);
        }
    }
    CHECK_THAT(err.text(), Contains("restart 2 of 2 on 2 ranks"));
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("the caller's rank failing every attempt is listed each time, its last exception nested", "[restart]") {
    try {
        CapturedStderr err;
        mpify::ranch(restarting(1), 2, in_library::fail_before_restart, 0, 99, std::string("throw"));
        FAIL("ranch returned");
    } catch (const mpify::WorkerError& e) {
        REQUIRE(e.failures().size() == 2);
        CHECK(e.failures()[0].rank == 0);
        CHECK(e.failures()[1].exception_type == "std::runtime_error");
        CHECK(e.failures()[1].message == "failing on attempt 1");
        CHECK_THROWS_WITH(std::rethrow_if_nested(e), "failing on attempt 1");
    }
}

TEST_CASE("without restarts a failure is reported as before, from attempt 0", "[restart]") {
    REQUIRE_THROWS_AS(mpify::ranch(mpify_test::quiet(), 2, in_library::fail_before_restart, 0, 1, std::string("throw")),
                      std::runtime_error);
    try {
        mpify::ranch(mpify_test::quiet(), 2, in_library::fail_before_restart, 1, 1, std::string("throw"));
        FAIL("ranch returned");
    } catch (const mpify::WorkerError& e) {
        CHECK_THAT(e.what(), !Contains("failed on each") && !Contains("\nattempt 1"));
        REQUIRE(e.failures().size() == 1);
        CHECK(e.failures()[0].attempt == 0);
    }
}

TEST_CASE("a timeout is never retried", "[restart]") {
    CapturedStderr err;
    mpify::Options options = restarting(3);
    options.timeout = std::chrono::milliseconds(1500);
    std::atomic<int> started{0};
    options.on_output = [&](int, mpify::Stream, const std::string& line) {
        if (line.find("marker") != std::string::npos) ++started;
    };
    mpify_test::warm_up(options, 2, in_library::add, 1, 2);  // the timeout is for the workers' run
    REQUIRE_THROWS_AS(mpify::ranch(options, 2, in_library::hang_on_workers, 7), mpify::TimeoutError);
    // A restart would say so before it began (and start the worker again); a slow start
    // (exec under a sanitizer) may time out before the worker printed anything.
    CHECK_THAT(err.text(), !Contains("restart"));
    CHECK(started <= 1);
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("an interrupt in a restarted attempt ends the call without another restart", "[restart]") {
    CapturedStderr err;
    mpify::Options options = restarting(3);
    std::atomic<int> waiting{0};
    options.on_output = [&](int, mpify::Stream, const std::string& line) {
        if (line.find("waiting on attempt") != std::string::npos && ++waiting == 1) mpify::request_interrupt();
    };
    REQUIRE_THROWS_AS(mpify::ranch(options, 2, in_library::fail_then_wait_for_interrupt, 60), mpify::Interrupted);
    CHECK(waiting == 1);
    CHECK_THAT(err.text(), Contains("restart 1 of 3 on 2 ranks") && !Contains("restart 2"));
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("restarts are checked before anything starts", "[restart][usage]") {
    mpify::Options options = mpify_test::quiet();
    options.restarts = -1;
    REQUIRE_THROWS_WITH(mpify::ranch(options, 2, in_library::add, 1, 2), Contains("Options::restarts is -1"));
    mpify::DdpOptions two_machines;
    two_machines.nodes = 2;
    two_machines.port = 29999;
    options.restarts = 1;
    REQUIRE_THROWS_WITH(mpify::in_ddp(two_machines, options, 2, ddp_test::allreduce_rank),
                        Contains("Options::restarts needs a group that this call owns"));
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("in_ddp restarts with a fresh group after a rank is killed mid-call", "[restart][ddp]") {
    CapturedStderr err;
    for (int n : {2, 3}) {
        INFO("n = " << n);
        // ranks 0..n-1 and 1000 × restart 1 on each
        CHECK(mpify::in_ddp(mpify::DdpOptions{}, restarting(1), n, ddp_test::allreduce_after_restarts, 1, 1) ==
              n * (n - 1) / 2 + 1000 * n);
    }
    mpify::DdpOptions gloo;
    gloo.backend = mpify::Backend::gloo;
    CHECK(mpify::in_ddp(gloo, restarting(2), 2, ddp_test::allreduce_after_restarts, 1, 2) == 1 + 2000 * 2);
    CHECK_THAT(err.text(), Contains("mpify: rank 1 was killed by SIGKILL"));
    CHECK(mpify_test::has_no_children());
}
