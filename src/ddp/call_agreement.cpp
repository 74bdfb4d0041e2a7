#include "ddp/call_agreement.hpp"

#include "forensics/collective_record.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

std::string key_of(int rank) { return fmt::format("mpify/recorded-calls/{}", rank); }

// Calls as published: a line each, tab-separated fields (none of the texts holds a tab
// or a line end: they are mpify's names and c10's type names).
std::string published(const std::vector<CollectiveCall>& calls) {
    std::string text;
    for (const CollectiveCall& call : calls)
        text += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n", call.sequence, call.operation, call.dtype,
                            call.elements, call.bytes, call.detail, call.site, call.bucket);
    return text;
}

std::optional<CollectiveCall> parse_call(const std::string& line) {
    std::vector<std::string> fields;
    std::istringstream in(line);
    std::string field;
    while (std::getline(in, field, '\t')) fields.push_back(field);
    if (fields.size() != 8) return std::nullopt;
    CollectiveCall call;
    try {
        call.sequence = std::stoull(fields[0]);
        call.operation = fields[1];
        call.dtype = fields[2];
        call.elements = std::stoll(fields[3]);
        call.bytes = std::stoull(fields[4]);
        call.detail = fields[5];
        call.site = fields[6];
        call.bucket = std::stoi(fields[7]);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    return call;
}

std::vector<CollectiveCall> parse_published(const std::vector<std::uint8_t>& bytes) {
    std::vector<CollectiveCall> calls;
    std::istringstream in(std::string(bytes.begin(), bytes.end()));
    std::string line;
    while (std::getline(in, line))
        if (auto call = parse_call(line)) calls.push_back(std::move(*call));
    return calls;
}

}  // namespace

std::optional<std::string> find_call_mismatch(const ProcessGroupState& group, std::uint64_t sequence) {
    if (sequence == 0 || !group.store) return std::nullopt;
    const std::vector<CollectiveCall> mine = own_recorded_calls();
    // Once per wait: the group's record and the sequence say which.
    thread_local std::uint64_t published_generation = 0;
    thread_local std::uint64_t published_sequence = 0;
    if (published_generation != collective_record_generation() || published_sequence != sequence) {
        const std::string text = published(mine);
        group.store->set(key_of(group.rank), std::vector<std::uint8_t>(text.begin(), text.end()));
        published_generation = collective_record_generation();
        published_sequence = sequence;
    }
    for (int peer = 0; peer < group.world_size; ++peer) {
        if (peer == group.rank || !group.store->check({key_of(peer)})) continue;
        // The first call both recorded that differs: where the ranks' paths parted.
        for (const CollectiveCall& theirs : parse_published(group.store->get(key_of(peer)))) {
            const auto same_number = std::find_if(mine.begin(), mine.end(), [&](const CollectiveCall& call) {
                return call.sequence == theirs.sequence;
            });
            if (same_number == mine.end() || same_number->same_call_as(theirs)) continue;
            return fmt::format("ranks made different collective calls at #{}: rank {} {}, rank {} {}. Every rank "
                               "must make the same collective calls in the same order, with the same sizes (look "
                               "for a condition on the rank, or on data that differs between ranks, around one of "
                               "them)",
                               theirs.sequence, group.rank, same_number->describe(), peer, theirs.describe());
        }
    }
    return std::nullopt;
}

MPIFY_END_DETAIL_NAMESPACE
