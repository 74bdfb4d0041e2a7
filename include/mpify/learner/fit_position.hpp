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
    std::int64_t batch = 0;             ///< batches of the next epoch done (a mid-epoch checkpoint)
    std::int64_t batches_per_epoch = 0; ///< at `world_size`
    int world_size = 1;                 ///< ranks that trained
    std::uint64_t seed = 0;             ///< the training shuffle's (the sampler's epoch is `epoch`)
    double partial_loss_sum = 0;        ///< training loss of the `batch` batches done, over every rank
};

}  // namespace learner
MPIFY_END_NAMESPACE
