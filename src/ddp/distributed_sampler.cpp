#include <mpify/distributed_sampler.hpp>
#include <mpify/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>

MPIFY_BEGIN_NAMESPACE

DistributedSampler::DistributedSampler(std::int64_t size, int rank, int world_size, bool shuffle, std::uint64_t seed)
    : size_(size), rank_(rank), world_size_(world_size), shuffle_(shuffle), seed_(seed) {
    if (size < 1 || world_size < 1 || rank < 0 || rank >= world_size)
        throw UsageError(fmt::format("mpify::DistributedSampler: needs size >= 1 and 0 <= rank < world_size "
                                     "(size {}, rank {}, world_size {})",
                                     size, rank, world_size));
}

std::int64_t DistributedSampler::shard_size() const { return (size_ + world_size_ - 1) / world_size_; }

std::vector<std::int64_t> DistributedSampler::indices() const { return indices_after(0); }

std::vector<std::int64_t> DistributedSampler::indices_after(std::int64_t done) const {
    if (done < 0)
        throw UsageError(fmt::format("mpify::DistributedSampler::indices_after: done is {}; it counts samples, from 0",
                                     done));
    std::vector<std::int64_t> order(static_cast<std::size_t>(size_));
    std::iota(order.begin(), order.end(), std::int64_t{0});
    if (shuffle_) {
        // mt19937_64 and a hand-written Fisher-Yates: the same sequence on every
        // platform and library version (std::shuffle's algorithm is unspecified).
        std::mt19937_64 random(seed_ * 1000003u + static_cast<std::uint64_t>(epoch_));
        for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[random() % i]);
    }
    // Positions done + rank, done + rank + world_size, ... of the permutation, padded by
    // wrapping around to its start so that every rank has as many.
    const std::int64_t rest = std::max<std::int64_t>(0, size_ - done);
    const std::int64_t each = (rest + world_size_ - 1) / world_size_;
    std::vector<std::int64_t> shard;
    shard.reserve(static_cast<std::size_t>(each));
    for (std::int64_t j = 0; j < each; ++j)
        shard.push_back(order[static_cast<std::size_t>((done + rank_ + j * world_size_) % size_)]);
    return shard;
}

MPIFY_END_NAMESPACE
