#include "call/shrinking_placement.hpp"

#include "spawn/launchers/launcher.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>

MPIFY_BEGIN_DETAIL_NAMESPACE

ShrinkingPlacement::ShrinkingPlacement(const Options& options, int n, const std::string& label)
    : placement_(options.placement), caller_rank_(options.caller_rank), n_(n), min_ranks_(options.min_ranks), ranks_(n),
      shrinking_(options.min_ranks > 0 && options.placement.launcher != Placement::Launcher::this_machine) {
    if (options.min_ranks < 0 || options.min_ranks > n)
        throw UsageError(fmt::format("{}: Options::min_ranks is {}; it must be between 0 (never run on fewer ranks) "
                                     "and the call's {} ranks",
                                     label, options.min_ranks, n));
    if (shrinking_) placement_ = resolve_placement(placement_, n - (caller_rank_ ? 1 : 0));
}

std::vector<std::string> ShrinkingPlacement::leave_out_lost(const std::vector<RankFailure>& failures) {
    std::vector<std::string> lost;
    if (!shrinking_) return lost;
    const std::vector<PlacedRank> placed = placed_ranks(placement_, ranks_, caller_rank_);
    for (const RankFailure& f : failures) {
        if (f.kind != RankFailure::Kind::lost) continue;
        const auto rank =
            std::find_if(placed.begin(), placed.end(), [&](const PlacedRank& p) { return p.rank == f.rank; });
        if (rank == placed.end()) continue;  // the caller's own, or not of this attempt
        if (std::find(lost.begin(), lost.end(), rank->host) == lost.end()) lost.push_back(rank->host);
    }
    std::vector<std::string>& hosts = placement_.hosts;
    for (const std::string& host : lost) hosts.erase(std::remove(hosts.begin(), hosts.end(), host), hosts.end());
    const long held = static_cast<long>(hosts.size()) * std::max(1, placement_.ranks_per_host) + (caller_rank_ ? 1 : 0);
    ranks_ = static_cast<int>(std::min<long>(n_, held));
    return lost;
}

std::optional<std::string> ShrinkingPlacement::too_small() const {
    if (ranks_ < min_ranks_)
        return fmt::format("the machines that answer hold {} rank{}, fewer than Options::min_ranks = {}", ranks_,
                           ranks_ == 1 ? "" : "s", min_ranks_);
    if (caller_rank_ && *caller_rank_ >= ranks_)
        return fmt::format("the machines that answer hold {} ranks, and the caller's rank is {}", ranks_,
                           *caller_rank_);
    return std::nullopt;
}

MPIFY_END_DETAIL_NAMESPACE
