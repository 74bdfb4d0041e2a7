#pragma once
// The learning-rate finder's settings and result (Learner::lr_find), as plain data: free
// of LibTorch, so that a notebook can get a result from a ranch'ed function and plot it
// (pictures.hpp, plot_lr_find).
#include <mpify/abi.hpp>
#include <boost/serialization/vector.hpp>

#include <cstdint>
#include <vector>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// How Learner::lr_find sweeps.
struct LrFinderOptions {
    double start_lr = 1e-7;  ///< the first step's rate
    double end_lr = 10;      ///< the last step's, reached after `iterations` steps
    int iterations = 100;    ///< steps at most, the rate growing by the same factor each
    /// Stop once the smoothed loss exceeds this many times the lowest so far (it diverges);
    /// 0: never stop early.
    double stop_factor = 4;
};

/// What the finder saw: the rate of each step and the loss it gave, smoothed as fastai
/// does (an exponential moving average, bias-corrected), and the suggested rate.
struct LrFinderResult {
    std::vector<double> lrs;     ///< each step's learning rate, in order
    std::vector<double> losses;  ///< smoothed; under DDP the global batch's (every rank the same)
    double suggested_lr = 0;     ///< see valley_lr
    /// A tenth of the rate of the lowest loss: fastai's "minimum" suggestion, bolder than
    /// the valley's.
    double minimum_lr = 0;
    bool diverged = false;       ///< the sweep stopped early: the loss ran away

    /// Boost.Serialization: what ranch and in_ddp send between ranks.
    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & lrs & losses & suggested_lr & minimum_lr & diverged;
    }
};

/// The rate in the middle of the longest stretch over which the loss keeps falling (the
/// longest decreasing subsequence of `losses`): fastai's "valley" suggestion, a rate that
/// still trains fast with room before the loss turns. 0 when there are no losses.
double valley_lr(const std::vector<double>& lrs, const std::vector<double>& losses);

}  // namespace learner
MPIFY_END_NAMESPACE
