#include "forensics/call_agreement.hpp"

#include "forensics/collective_record.hpp"
#include "forensics/stack_dump_format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

std::string key_of(int rank) { return fmt::format("mpify/recorded-calls/{}", rank); }

// A record as published: as mpify-stacks prints one (stack_dump_format.hpp), a process
// that holds only its calls.
std::string published(std::vector<CollectiveCall> calls) {
    DumpedProcess process;
    process.collectives = std::move(calls);
    return format_stack_dump({process});
}

std::vector<CollectiveCall> parse_published(const std::string& text) {
    std::vector<DumpedProcess> processes = parse_stack_dump(text);
    return processes.empty() ? std::vector<CollectiveCall>{} : std::move(processes.front().collectives);
}

}  // namespace

std::optional<std::string> find_call_mismatch(const RecordExchange& exchange, std::uint64_t sequence) {
    if (sequence == 0) return std::nullopt;
    const std::vector<CollectiveCall> mine = own_recorded_calls();
    // Once per wait: the group's record and the sequence say which.
    thread_local std::uint64_t published_generation = 0;
    thread_local std::uint64_t published_sequence = 0;
    if (published_generation != collective_record_generation() || published_sequence != sequence) {
        exchange.publish(key_of(exchange.rank), published(mine));
        published_generation = collective_record_generation();
        published_sequence = sequence;
    }
    for (int peer = 0; peer < exchange.world_size; ++peer) {
        if (peer == exchange.rank) continue;
        const std::optional<std::string> theirs_published = exchange.published(key_of(peer));
        if (!theirs_published) continue;
        // The first call both recorded that differs: where the ranks' paths parted.
        for (const CollectiveCall& theirs : parse_published(*theirs_published)) {
            const auto same_number = std::find_if(mine.begin(), mine.end(), [&](const CollectiveCall& call) {
                return call.sequence == theirs.sequence;
            });
            if (same_number == mine.end() || same_number->same_call_as(theirs)) continue;
            return fmt::format("ranks made different collective calls at #{}: rank {} {}, rank {} {}. Every rank "
                               "must make the same collective calls in the same order, with the same sizes (look "
                               "for a condition on the rank, or on data that differs between ranks, around one of "
                               "them)",
                               theirs.sequence, exchange.rank, same_number->describe(), peer, theirs.describe());
        }
    }
    return std::nullopt;
}

MPIFY_END_DETAIL_NAMESPACE
