#pragma once
// The data the Learner's tests fit: a line a linear model can get close to.
#include <mpify/learner/learner.hpp>

#include <torch/torch.h>

#include <cstdint>

namespace mpify_examples::testing {

/// n points of y = 3x - 1 with a little noise, drawn from `seed`.
inline mpify::learner::DataSet line(std::int64_t n, std::uint64_t seed) {
    auto gen = at::detail::createCPUGenerator(seed);
    const at::Tensor x = torch::rand({n, 1}, gen);
    return {x, 3 * x - 1 + 0.01 * torch::randn({n, 1}, gen)};
}

}  // namespace mpify_examples::testing
