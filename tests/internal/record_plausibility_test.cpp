// The record of collective calls lies in each rank's own memory, where the rank may have
// written anything: it is used only when it is what mpify writes, and a record left out
// reaches the caller as a note, escaped like everything else a rank wrote.
#include "forensics/collective_record.hpp"
#include "forensics/stack_dump_format.hpp"

#include <mpify/stack.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

using Catch::Contains;
using namespace mpify::detail;

namespace {

template <std::size_t N>
void put(char (&field)[N], const char* text) {
    std::strncpy(field, text, N - 1);
    field[N - 1] = '\0';
}

// Rank 1's record of 3 all-reduces, as mpify writes it: two ended, the third waiting.
CollectiveRecordMemory written_record(std::int64_t now_ns) {
    CollectiveRecordMemory record{};
    std::memcpy(record.header.magic, collective_record_magic, sizeof record.header.magic);
    record.header.capacity = recorded_calls;
    record.header.rank = 1;
    record.header.world_size = 2;
    for (std::uint64_t sequence = 1; sequence <= 3; ++sequence) {
        RecordedCall& slot = record.calls[sequence - 1];
        slot.sequence = sequence;
        slot.elements = 4;
        slot.bytes = 16;
        slot.started_ns = now_ns - 1'000'000'000 + std::int64_t(sequence);
        slot.ended_ns = sequence < 3 ? now_ns - 500'000'000 : 0;
        slot.bucket = -1;
        put(slot.operation, "allreduce");
        put(slot.dtype, "Float");
        put(slot.detail, "SUM");
        put(slot.site, "mpify::ddp::all_reduce");
    }
    record.header.next_sequence = 3;
    return record;
}

}  // namespace

TEST_CASE("a record as mpify writes it is read whole", "[record]") {
    const std::int64_t now = monotonic_ns();
    std::string why;
    const auto calls = recorded_calls_in(written_record(now), now, &why);
    CHECK(why.empty());
    REQUIRE(calls.size() == 3);
    CHECK(calls.front().ended);
    CHECK(calls.back().sequence == 3);
    CHECK_FALSE(calls.back().ended);
    CHECK(calls.back().started_seconds_ago == Approx(1.0).margin(1e-6));
}

TEST_CASE("a record that is not what mpify writes is left out, saying why", "[record]") {
    const std::int64_t now = monotonic_ns();
    struct Case {
        const char* what;
        std::function<void(CollectiveRecordMemory&)> spoil;
        const char* named;
    };
    const std::vector<Case> cases{
        {"a sequence far beyond the last call", [](auto& r) { r.calls[2].sequence = 6582955380372605490ull; },
         "call #6582955380372605490 in place 2 of a ring whose last call is #3"},
        {"a call out of its place in the ring", [](auto& r) { r.calls[5] = r.calls[1]; }, "call #2 in place 5"},
        {"a start not yet come", [now](auto& r) { r.calls[0].started_ns = now + 651'079'518'700'000'000; },
         "call #1 starts or ends where this machine's clock has not been"},
        {"an end before its start", [](auto& r) { r.calls[1].ended_ns = r.calls[1].started_ns - 1; },
         "call #2 starts or ends"},
        {"more bytes than a machine holds", [](auto& r) { r.calls[1].bytes = 620363829361ull << 20; },
         "call #2 of 4 elements in 650498622736039936 bytes"},
        {"a negative element count", [](auto& r) { r.calls[0].elements = -5; }, "call #1 of -5 elements"},
        {"a rank outside its group", [](auto& r) { r.header.rank = 5; }, "rank 5 of a group of 2"},
        {"a ring of another size", [](auto& r) { r.header.capacity = 7; }, "it holds 7 calls, not 64"},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        CollectiveRecordMemory record = written_record(now);
        c.spoil(record);
        std::string why;
        CHECK(recorded_calls_in(record, now, &why).empty());
        CHECK_THAT(why, Contains(c.named));
    }
}

TEST_CASE("a record left out reaches the caller's line-up as a note, its control characters escaped", "[record]") {
    DumpedProcess process;
    process.pid = 42;
    process.record_ignored = "call #9 \x1b[31min place 3";
    process.threads.push_back(ThreadStack{});
    const std::vector<DumpedProcess> parsed = parse_stack_dump(format_stack_dump({process}));
    REQUIRE(parsed.size() == 1);
    CHECK(parsed.front().record_ignored == process.record_ignored);

    mpify::RankStack stack;
    stack.rank = 2;
    stack.collectives_ignored = parsed.front().record_ignored;
    const std::string text = mpify::line_up_collectives({stack});
    CHECK_THAT(text, Contains("rank 2's record of collective calls was left out, not being what mpify writes: call "
                              "#9 \\x1b[31min place 3"));
    CHECK(text.find('\x1b') == std::string::npos);
}
