#include "learner/rank_rows.hpp"

#include <torch/torch.h>

#include <algorithm>

MPIFY_BEGIN_NAMESPACE
namespace learner {

at::Tensor rank_rows(int rank, int world_size, std::int64_t size) {
    // arange refuses a start past its end: a rank past the items starts at the end.
    return torch::arange(std::min<std::int64_t>(rank, size), size, world_size, torch::kLong);
}

}  // namespace learner
MPIFY_END_NAMESPACE
