// Something else in the caller reaps children it does not own (a SIGCHLD handler that
// calls waitpid(-1, ...), as apps and interpreters have): ranch must still end, with the
// results or with an error that says what happened, never spin.
#include "functions.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>

namespace {

void reap_every_child(int) {
    const int saved = errno;
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    errno = saved;
}

// Installs reap_every_child for SIGCHLD while it lives.
class ForeignReaper {
public:
    ForeignReaper() {
        struct sigaction action{};
        action.sa_handler = reap_every_child;
        action.sa_flags = SA_RESTART;
        sigemptyset(&action.sa_mask);
        ::sigaction(SIGCHLD, &action, &previous_);
    }
    ~ForeignReaper() { ::sigaction(SIGCHLD, &previous_, nullptr); }

private:
    struct sigaction previous_{};
};

}  // namespace

TEST_CASE("calls under a SIGCHLD handler that reaps every child return their results", "[robustness]") {
    const ForeignReaper reaper;
    for (int i = 0; i < 20; ++i) {
        INFO("call " << i);
        CHECK(mpify::ranch(3, in_library::add, 1, 2) == std::vector<int>{3, 4, 5});
    }
}

TEST_CASE("a worker lost to a foreign reaper is an error naming it, not a hang", "[robustness][failure]") {
    const ForeignReaper reaper;
    for (int i = 0; i < 5; ++i) {
        INFO("call " << i);
        try {
            mpify::ranch(mpify_test::quiet(), 3, in_library::crash_on, 1, std::string("exit3"));
            FAIL("ranch returned");
        } catch (const mpify::WorkerError& e) {
            REQUIRE(e.failures().size() == 1);
            const mpify::RankFailure& failure = e.failures().front();
            CHECK(failure.rank == 1);
            // Either mpify reaped rank 1 first and read its exit code, or the handler did.
            if (failure.kind == mpify::RankFailure::Kind::exited) {
                CHECK(failure.exit_code == 3);
            } else {
                CHECK(failure.kind == mpify::RankFailure::Kind::reaped_elsewhere);
                CHECK_THAT(e.what(), Catch::Contains("something else in this process reaped it"));
            }
        }
    }
}

TEST_CASE("the timeout holds under a SIGCHLD handler that reaps every child", "[robustness][failure]") {
    const ForeignReaper reaper;
    mpify::Options options = mpify_test::quiet();
    options.timeout = std::chrono::milliseconds(1500);
    options.caller_rank = std::nullopt;
    mpify_test::warm_up(options, 2, in_library::add, 1, 2);
    const auto started = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(mpify::ranch(options, 2, in_library::hang_on_workers, 7), mpify::TimeoutError);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
    CHECK(mpify_test::has_no_children());
}
