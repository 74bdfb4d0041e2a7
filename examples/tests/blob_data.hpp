#pragma once
// Data a classifier's tests use: three classes of points around three centres, close
// enough that a linear model gets most, not all, right.
#include <mpify/learner/learner.hpp>

#include <torch/torch.h>

#include <cstdint>

namespace mpify_examples::testing {

/// n points (2 features) of 3 classes, drawn from `seed`.
inline mpify::learner::DataSet blobs(std::int64_t n, std::uint64_t seed) {
    auto gen = at::detail::createCPUGenerator(seed);
    const at::Tensor labels = torch::randint(0, 3, {n}, gen, torch::kLong);
    const at::Tensor centres = torch::tensor({{0.0f, 1.0f}, {1.0f, -0.5f}, {-1.0f, -0.5f}});
    return {centres.index_select(0, labels) + 0.6 * torch::randn({n, 2}, gen), labels};
}

/// Cross-entropy, the classifier tests' loss.
inline at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& labels) {
    return torch::nn::functional::cross_entropy(logits, labels);
}

}  // namespace mpify_examples::testing
