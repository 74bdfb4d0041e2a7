// The ranks' records of their collective calls side by side: what a person looking at a
// stuck run asks first — who waits in which call, who never came, who called something
// else at the same point.
#include "common/printable.hpp"

#include <mpify/stack.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

MPIFY_BEGIN_NAMESPACE
namespace {

std::string size_text(std::uint64_t bytes) {
    if (bytes >= 1 << 20) return fmt::format("{:.1f} MiB", double(bytes) / (1 << 20));
    if (bytes >= 1 << 10) return fmt::format("{:.1f} KiB", double(bytes) / (1 << 10));
    return fmt::format("{} bytes", bytes);
}

std::string rank_name(const RankStack& rank) {
    return rank.host.empty() ? fmt::format("rank {}", rank.rank) : fmt::format("rank {} on {}", rank.rank, rank.host);
}

const CollectiveCall* call_numbered(const RankStack& rank, std::uint64_t sequence) {
    for (const CollectiveCall& call : rank.collectives)
        if (call.sequence == sequence) return &call;
    return nullptr;
}

// Where a rank that has not entered the latest call is: its own frames, when they were read.
std::string whereabouts(const RankStack& rank) {
    if (rank.threads.empty()) return "";
    return "; it is in " + rank.summary();
}

}  // namespace

std::string CollectiveCall::describe() const {
    std::string what = site;
    if (bucket >= 0) what += fmt::format(" bucket {}", bucket);
    std::string tensor = dtype.empty() ? "" : fmt::format("{} x {}, {}", dtype, elements, size_text(bytes));
    if (!detail.empty()) tensor += (tensor.empty() ? "" : ", ") + detail;
    if (what.empty()) return fmt::format("{} #{} ({})", operation, sequence, tensor);
    if (tensor.empty()) return fmt::format("{} #{} ({})", operation, sequence, what);
    return fmt::format("{} #{} ({}: {})", operation, sequence, what, tensor);
}

bool CollectiveCall::same_call_as(const CollectiveCall& other) const {
    return operation == other.operation && dtype == other.dtype && elements == other.elements && detail == other.detail;
}

// line_up_collectives, before the records' names are made printable.
static std::string lined_up(const std::vector<RankStack>& ranks) {
    std::string text;
    for (const RankStack& rank : ranks)
        if (!rank.collectives_ignored.empty())
            text += fmt::format("\n- {}'s record of collective calls was left out, not being what mpify writes: {}",
                                rank_name(rank), rank.collectives_ignored);
    std::uint64_t latest = 0;
    for (const RankStack& rank : ranks)
        for (const CollectiveCall& call : rank.collectives) latest = std::max(latest, call.sequence);
    if (latest == 0) return text;
    for (const RankStack& rank : ranks) {
        if (rank.collectives.empty()) continue;
        const CollectiveCall& last = rank.collectives.back();
        if (last.sequence == latest && !last.ended)
            text += fmt::format("\n- {} waits in {} since {:.1f} s", rank_name(rank), last.describe(),
                                last.started_seconds_ago);
        else if (last.sequence == latest)
            text += fmt::format("\n- {} ended {} {:.1f} s ago{}", rank_name(rank), last.describe(),
                                last.ended_seconds_ago, whereabouts(rank));
        else
            text += fmt::format("\n- {} never entered #{}: its last was {}{}{}", rank_name(rank), latest,
                                last.describe(),
                                last.ended ? fmt::format(", ended {:.1f} s ago", last.ended_seconds_ago)
                                           : fmt::format(", waiting since {:.1f} s", last.started_seconds_ago),
                                whereabouts(rank));
    }
    // The same sequence number, different calls: the ranks' code took different paths.
    std::map<std::uint64_t, const RankStack*> first_maker;
    for (const RankStack& rank : ranks)
        for (const CollectiveCall& call : rank.collectives) {
            const auto [at, first] = first_maker.emplace(call.sequence, &rank);
            if (first) continue;
            const CollectiveCall* theirs = call_numbered(*at->second, call.sequence);
            if (theirs != nullptr && !theirs->same_call_as(call))
                text += fmt::format("\n- different calls at #{}: {} made {}, {} made {}", call.sequence,
                                    rank_name(*at->second), theirs->describe(), rank_name(rank), call.describe());
        }
    return text;
}

// A record's names were written by the rank itself: printable, whatever they hold.
std::string line_up_collectives(const std::vector<RankStack>& ranks) { return detail::printable(lined_up(ranks)); }

MPIFY_END_NAMESPACE
