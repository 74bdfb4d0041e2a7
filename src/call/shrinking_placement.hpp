#pragma once
// Options::min_ranks: the machines a call with restarts runs on, shrinking as machines
// are lost. The placement is resolved once (its launcher asked once), so that a lost
// host can be taken out of its list; each later attempt runs on what is left, with as
// many ranks as the remaining hosts hold, up to the call's n.
#include <mpify/abi.hpp>
#include <mpify/error.hpp>
#include <mpify/options.hpp>

#include <optional>
#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

class ShrinkingPlacement {
public:
    /// For a call of `n` ranks with `options` (min_ranks, caller_rank, placement). Throws
    /// UsageError for a min_ranks out of [0, n]; resolves a remote placement when
    /// min_ranks > 0.
    ShrinkingPlacement(const Options& options, int n, const std::string& label);

    /// The placement of the next attempt.
    const Placement& placement() const { return placement_; }
    /// The number of ranks of the next attempt.
    int ranks() const { return ranks_; }

    /// Leaves out of the next attempts the hosts of the lost ranks among `failures` (ranks
    /// of an attempt of ranks() ranks), when shrinking is on. Returns the hosts left out
    /// (empty: none, or shrinking is off).
    std::vector<std::string> leave_out_lost(const std::vector<RankFailure>& failures);

    /// Why the next attempt cannot run (fewer ranks than min_ranks, or none for the
    /// caller's rank), or nullopt when it can.
    std::optional<std::string> too_small() const;

private:
    Placement placement_;
    std::optional<int> caller_rank_;
    int n_;
    int min_ranks_;
    int ranks_;
    bool shrinking_;
};

MPIFY_END_DETAIL_NAMESPACE
