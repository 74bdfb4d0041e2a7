#pragma once
// Metrics for the Learner. A metric adds up over batches (a sum and how many items it
// covers), so that its value over a validation set split across ranks is exact: the
// ranks' sums and counts are added, then divided once.
#include <mpify/abi.hpp>
#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <utility>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// A named metric over the validation set.
struct Metric {
    std::string name;  ///< its column in the progress table and its key in History::final
    /// (sum of the metric over the batch's items, number of items) for one batch.
    std::function<std::pair<double, double>(const at::Tensor& output, const at::Tensor& target)> batch;
    /// Applied to sum / count at the end (e.g. a square root for RMSE); unset: identity.
    std::function<double(double)> finish;
};

/// Single-label classification: output is N x classes logits, target N class indices.
Metric accuracy();
/// Multi-label classification: output N x classes logits, target N x classes of 0/1.
/// A label counts as predicted when sigmoid(logit) > threshold; the metric is the
/// fraction of (sample, class) decisions that are right, as fastai's accuracy_multi.
Metric accuracy_multi(double threshold = 0.5);
/// Multi-label: the fraction of samples whose whole predicted label set is right.
Metric exact_match(double threshold = 0.5);
/// Regression: root of the mean squared error.
Metric rmse();

}  // namespace learner
MPIFY_END_NAMESPACE
