// What reaches the caller when a worker's channel carries garbage where its result should
// be (a worker whose memory was corrupted, a function that wrote to fd 3, a type whose
// load() throws): always a WorkerError naming the rank and saying what was wrong, never a
// silently wrong value or a bare Boost exception.
#include "support.hpp"

#include <mpify/mpify.hpp>

#include <catch2/catch.hpp>

#include <boost/archive/archive_exception.hpp>
#include <boost/serialization/split_member.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace {

// mpify's frame, written by hand: a type byte (2: a result) and the payload's size as
// 8 little-endian bytes (src/wire/frames.hpp), then the payload.
std::string result_frame(std::uint64_t announced_size, const std::string& payload) {
    std::string frame(9, '\0');
    frame[0] = 2;
    std::memcpy(&frame[1], &announced_size, sizeof announced_size);
    return frame + payload;
}

// Rank 0 (the caller) returns 7; every other rank writes `raw` on its end of the channel
// (fd 3, the process contract) in place of a result, and ends at once.
int send_raw_result(std::string raw) {
    if (mpify::local_rank() == 0) return 7;
    std::size_t written = 0;
    while (written < raw.size()) {
        const ssize_t n = ::write(3, raw.data() + written, raw.size() - written);
        if (n <= 0) ::_exit(3);
        written += static_cast<std::size_t>(n);
    }
    ::_exit(0);
}
MPIFY_REGISTER(send_raw_result);

// A result type that the worker writes and the caller cannot read back.
struct RefusesToLoad {
    int value = 0;
    template <class Archive>
    void save(Archive& archive, const unsigned int) const {
        archive << value;
    }
    template <class Archive>
    void load(Archive& archive, const unsigned int) {
        archive >> value;
        throw std::domain_error("RefusesToLoad cannot be read back");
    }
    BOOST_SERIALIZATION_SPLIT_MEMBER()
};

RefusesToLoad refuses_to_load() { return RefusesToLoad{mpify::local_rank()}; }
MPIFY_REGISTER(refuses_to_load);

// Rank 0 (the caller) returns 7; every other rank closes fd 3 (mpify's channel, as code
// closing "every fd above stderr" would) and goes on: it waits until it is stopped.
int close_the_channel_and_go_on() {
    if (mpify::local_rank() == 0) return 7;
    ::close(3);
    for (;;) ::pause();
}
MPIFY_REGISTER(close_the_channel_and_go_on);

// The one failure of a call of send_raw_result(raw) on 2 ranks: rank 1's.
mpify::RankFailure failure_of_rank_1(const std::string& raw, std::string& what) {
    try {
        mpify::ranch(mpify_test::quiet(), 2, send_raw_result, raw);
    } catch (const mpify::WorkerError& e) {
        what = e.what();
        REQUIRE(e.failures().size() == 1);
        return e.failures().front();
    }
    FAIL("ranch returned a value although rank 1 sent garbage");
    return {};
}

}  // namespace

TEST_CASE("a result with bytes left over is refused, naming the rank", "[robustness][channel]") {
    const std::string payload = mpify::detail::to_blob(41) + "junk";
    std::string what;
    const mpify::RankFailure failure = failure_of_rank_1(result_frame(payload.size(), payload), what);
    CHECK(failure.rank == 1);
    CHECK(failure.kind == mpify::RankFailure::Kind::unreadable_result);
    CHECK_THAT(what, Catch::Contains("mpify::ranch(") &&
                         Catch::Contains("rank 1 returned a result that the caller "
                                         "could not read") &&
                         Catch::Contains("reading it as int") && Catch::Contains("4 of its 8 bytes were left over"));
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a result too short for its type names the rank, with Boost's exception nested", "[robustness][channel]") {
    try {
        mpify::ranch(mpify_test::quiet(), 2, send_raw_result, result_frame(1, "\x01"));
        FAIL("ranch returned a value read from one byte");
    } catch (const mpify::WorkerError& e) {
        REQUIRE(e.failures().size() == 1);
        CHECK(e.failures().front().rank == 1);
        CHECK(e.failures().front().kind == mpify::RankFailure::Kind::unreadable_result);
        CHECK_THAT(e.what(), Catch::Contains("boost::archive::archive_exception"));
        CHECK_THROWS_AS(std::rethrow_if_nested(e), boost::archive::archive_exception);
    }
}

TEST_CASE("a result whose load() throws names the rank, with the exception nested", "[robustness][channel]") {
    try {
        mpify::ranch(3, refuses_to_load);
        FAIL("ranch returned results that could not be read");
    } catch (const mpify::WorkerError& e) {
        REQUIRE(e.failures().size() == 1);
        CHECK(e.failures().front().rank == 1);  // the first one read
        CHECK_THAT(e.what(), Catch::Contains("std::domain_error: RefusesToLoad cannot be read back"));
        CHECK_THAT(e.what(), Catch::Contains("RefusesToLoad"));
        CHECK_THROWS_AS(std::rethrow_if_nested(e), std::domain_error);
    }
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a frame announcing more than the limit is a protocol failure of that rank", "[robustness][channel]") {
    std::string what;
    const mpify::RankFailure failure = failure_of_rank_1(result_frame(~std::uint64_t{0} - 15, ""), what);
    CHECK(failure.kind == mpify::RankFailure::Kind::protocol);
    CHECK_THAT(what, Catch::Contains("rank 1 broke mpify's protocol") &&
                         Catch::Contains("announces 18446744073709551600 bytes; the limit is"));
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a worker that closes its channel and goes on fails at once, not at the timeout", "[robustness][channel]") {
    mpify::Options options = mpify_test::quiet();
    options.timeout = std::chrono::minutes(5);  // what found it before
    try {
        mpify::ranch(options, 2, close_the_channel_and_go_on);
        FAIL("ranch returned although rank 1 closed its channel");
    } catch (const mpify::TimeoutError&) {
        FAIL("found only by the timeout");
    } catch (const mpify::WorkerError& e) {
        REQUIRE(e.failures().size() == 1);
        CHECK(e.failures().front().rank == 1);
        CHECK(e.failures().front().kind == mpify::RankFailure::Kind::protocol);
        CHECK_THAT(e.what(), Catch::Contains("rank 1 broke mpify's protocol") &&
                                 Catch::Contains("closed mpify's channel (fd 3) before returning"));
    }
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("junk after a complete result is a protocol failure of that rank", "[robustness][channel]") {
    const std::string payload = mpify::detail::to_blob(41);
    std::string what;
    // Shorter than a frame's header: seen when the worker has ended.
    mpify::RankFailure failure = failure_of_rank_1(result_frame(payload.size(), payload) + "garbage", what);
    CHECK(failure.kind == mpify::RankFailure::Kind::protocol);
    CHECK_THAT(what, Catch::Contains("rank 1 broke mpify's protocol") && Catch::Contains("part of a frame"));
    // A header's worth: refused as it arrives.
    failure = failure_of_rank_1(result_frame(payload.size(), payload) + "more garbage", what);
    CHECK(failure.kind == mpify::RankFailure::Kind::protocol);
    CHECK_THAT(what, Catch::Contains("rank 1 broke mpify's protocol") && Catch::Contains("unknown type 109"));
    CHECK(mpify_test::has_no_children());
}
