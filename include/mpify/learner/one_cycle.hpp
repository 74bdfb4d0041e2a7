#pragma once
// The 1cycle policy of fastai's fit_one_cycle: the learning rate warms up from
// max_lr / 25 to max_lr over the first quarter of training, then anneals to
// max_lr / 1e5, both along cosines; momentum (Adam's beta1) moves the opposite way,
// 0.95 -> 0.85 -> 0.95. High rates with low momentum, then a long cool-down.

#include <mpify/abi.hpp>
MPIFY_BEGIN_NAMESPACE
namespace learner {

/// Learning rate and momentum at one point of training.
struct HyperParameters {
    double lr;        ///< the learning rate
    double momentum;  ///< Adam's beta1
};

/// The schedule at `progress` in [0, 1] (fraction of all training steps done).
HyperParameters one_cycle(double max_lr, double progress);

}  // namespace learner
MPIFY_END_NAMESPACE
