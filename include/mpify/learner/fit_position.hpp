#pragma once
// Where a fit stands: what a Learner's checkpoint records so that a fit can go on where it
// stopped, at the same or another world size.
#include <mpify/abi.hpp>

#include <cstdint>
#include <string>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// Where a fit stands.
struct FitPosition {
    std::string schedule;               ///< "fit" or "fit_one_cycle"
    int epochs = 0;                     ///< of the whole fit
    double lr = 0;                      ///< fit's lr, fit_one_cycle's max_lr
    int epoch = 0;                      ///< epochs done
    std::int64_t batch = 0;             ///< batches of the next epoch done at `world_size` (mid-epoch)
    std::int64_t batches_per_epoch = 0; ///< at `world_size`
    int world_size = 1;                 ///< ranks that trained
    std::uint64_t seed = 0;             ///< the training shuffle's (the sampler's epoch is `epoch`)
    double partial_loss_sum = 0;        ///< training loss of the batches done, over every rank
    /// Samples of the next epoch done: the first `samples_done` of its shuffled order,
    /// whichever world sizes trained them (DistributedSampler::indices_after).
    std::int64_t samples_done = 0;
    std::int64_t partial_batches = 0;   ///< batches of the next epoch done, over every rank
};

}  // namespace learner
MPIFY_END_NAMESPACE
