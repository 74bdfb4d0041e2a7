// The one-machine group's barrier and how it watches its peers (ddp/shared_segment.hpp),
// with a forked child as the other rank.
#include "ddp/backends/shared_memory/shared_segment.hpp"

#include <mpify/error.hpp>

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

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

namespace {

/// Forks rank `rank` of a group of `world` meeting in `maker`'s segment: it opens the
/// segment and joins; with `leave_at_once` it gives up at its first look instead of
/// waiting. Exits 0 when join returned every rank's pids with its own and its parent's
/// in place (or returned none, having given up); 1 otherwise.
pid_t fork_rank_joining(const SharedSegment& maker, int world, int rank, bool leave_at_once = false) {
    const std::string locator = maker.locator();
    const pid_t parent = ::getpid();
    const pid_t child = ::fork();
    if (child == 0) {
        try {
            SharedSegment mine = SharedSegment::open(locator, world, rank);
            const std::vector<pid_t> pids = mine.join(a_minute_from_now(), [&] { return leave_at_once; });
            const bool as_expected = leave_at_once ? pids.empty()
                                                   : pids.size() == static_cast<std::size_t>(world) &&
                                                         pids[0] == parent && pids[rank] == ::getpid();
            ::_exit(as_expected ? 0 : 1);
        } catch (...) {
            ::_exit(1);
        }
    }
    return child;
}

int exit_status_of(pid_t child) {
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("ranks meeting in a segment made before they started learn every rank's pid", "[shared_segment]") {
    const SharedSegment maker = SharedSegment::create(3, 4096);
    SharedSegment rank0 = SharedSegment::open(maker.locator(), 3, 0);
    const pid_t one = fork_rank_joining(maker, 3, 1);
    const pid_t two = fork_rank_joining(maker, 3, 2);
    REQUIRE(one > 0);
    REQUIRE(two > 0);
    const std::vector<pid_t> pids = rank0.join(a_minute_from_now(), [] { return false; });
    CHECK(pids == std::vector<pid_t>{::getpid(), one, two});
    CHECK(exit_status_of(one) == 0);
    CHECK(exit_status_of(two) == 0);
    // The meeting was the segment's first barrier: the ranks' collectives go on from it.
    CHECK_NOTHROW(rank0.check_not_failed("after the meeting"));
}

TEST_CASE("a rank that never joins the segment made ahead is named at the group's timeout, and the others "
          "stop waiting",
          "[shared_segment][failure]") {
    const SharedSegment maker = SharedSegment::create(3, 4096);
    SharedSegment rank0 = SharedSegment::open(maker.locator(), 3, 0);
    const pid_t one = fork_rank_joining(maker, 3, 1);  // rank 2 never comes
    REQUIRE(one > 0);
    CHECK_THROWS_WITH(rank0.join(std::chrono::steady_clock::now() + std::chrono::milliseconds(200),
                                 [] { return false; }),
                      Contains("rank(s) 2 did not join the group within its timeout"));
    CHECK(exit_status_of(one) == 1);  // its minute's wait ended with the failure rank 0 marked
}

TEST_CASE("a rank that joined and ended before the others arrived is named; a rank that gives up leaves the "
          "meeting",
          "[shared_segment][failure]") {
    const SharedSegment maker = SharedSegment::create(3, 4096);
    SharedSegment rank0 = SharedSegment::open(maker.locator(), 3, 0);
    const pid_t one = fork_rank_joining(maker, 3, 1, /*leave_at_once=*/true);  // rank 2 never comes
    REQUIRE(one > 0);
    CHECK_THROWS_WITH(rank0.join(a_minute_from_now(), [] { return false; }),
                      Contains("rank 1 (pid " + std::to_string(one) + ") ended before every rank joined the group"));
    CHECK(exit_status_of(one) == 0);  // its join gave up and returned no pids
}
