#pragma once
// Sharding data over the ranks of a group, as fastai's DistributedDL does: every epoch
// each rank sees a shard of equal size, disjoint from the others' but for the padding
// that makes them equal, and set_epoch reshuffles.
#include <mpify/abi.hpp>
#include <mpify/export.hpp>

#include <cstdint>
#include <vector>

MPIFY_BEGIN_NAMESPACE

/// Which samples one rank handles in each epoch.
///
/// Every rank draws the same permutation of [0, size) from (seed, epoch), pads it by
/// wrapping around to a multiple of world_size, and takes every world_size-th index
/// starting at its rank: shards are disjoint but for at most world_size - 1 repeated
/// samples of the padding, and all have size ceil(size / world_size).
class MPIFY_API DistributedSampler {
public:
    /// The shards of `size` samples for `rank` of `world_size` ranks; `shuffle` false keeps
    /// the samples in order (padding included), `seed` varies the permutations.
    DistributedSampler(std::int64_t size, int rank, int world_size, bool shuffle = true, std::uint64_t seed = 0);
    /// Chooses the epoch, whose permutation indices() then returns.
    void set_epoch(std::int64_t epoch) { epoch_ = epoch; }
    /// This rank's sample indices for the current epoch, in the order to visit them.
    std::vector<std::int64_t> indices() const;
    /// This rank's share of the current epoch's samples after the first `done` of its
    /// permutation, sharded and padded as indices() does the whole: an epoch resumed after
    /// `done` samples were trained, at this world size or another. indices_after(0) is
    /// indices(); at the same world size, indices_after(b × world_size) is indices() from
    /// its b-th entry on.
    std::vector<std::int64_t> indices_after(std::int64_t done) const;
    /// Number of indices per rank per epoch.
    std::int64_t shard_size() const;

private:
    std::int64_t size_;
    int rank_;
    int world_size_;
    bool shuffle_;
    std::uint64_t seed_;
    std::int64_t epoch_ = 0;
};

MPIFY_END_NAMESPACE
