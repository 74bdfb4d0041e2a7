// The one-machine group's barrier and how it watches its peers (ddp/shared_segment.hpp),
// with a forked child as the other rank.
#include "ddp/backends/shared_memory/shared_segment.hpp"

#include <mpify/error.hpp>

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

using mpify::detail::SharedSegment;
using Catch::Matchers::Contains;

namespace {

std::chrono::steady_clock::time_point a_minute_from_now() {
    return std::chrono::steady_clock::now() + std::chrono::minutes(1);
}

/// Forks rank 1 of `segment`'s group: it opens the segment, meets rank 0 at one barrier and
/// exits (status 0 when all went well; no Catch in the child).
pid_t fork_rank_meeting_once(const SharedSegment& segment) {
    const std::string locator = segment.locator();
    const pid_t child = ::fork();
    if (child == 0) {
        try {
            SharedSegment mine = SharedSegment::open(locator, 2, 1);
            mine.barrier(a_minute_from_now(), "rank 1's only barrier");
            ::_exit(0);
        } catch (...) {
            ::_exit(1);
        }
    }
    return child;
}

}  // namespace

TEST_CASE("a rank gone before its peers watch it is no error until a wait needs it, then it is named at once",
          "[shared_segment]") {
    SharedSegment segment = SharedSegment::create(2, 4096);
    const pid_t child = fork_rank_meeting_once(segment);
    REQUIRE(child > 0);
    segment.barrier(a_minute_from_now(), "rank 0's first barrier");
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);  // reaped: its pid is gone
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);

    // What a rank whose function returned at once does to the others: it met every
    // barrier it had to and left before they looked at it.
    CHECK_NOTHROW(segment.watch_peers({::getpid(), child}));
    // A barrier it will never reach fails at the first look (not at the minute's deadline).
    CHECK_THROWS_WITH(segment.barrier(a_minute_from_now(), "the second barrier"),
                      Contains("the second barrier: rank 1 (pid " + std::to_string(child) +
                               ") ended while this rank waited for it"));
    CHECK_THROWS_WITH(segment.check_not_failed("a later collective"),
                      Contains("this rank's group failed in an earlier collective"));
}
