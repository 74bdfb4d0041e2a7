#pragma once
// Which items of a data set a rank takes when the ranks split it without padding (validation,
// get_preds): rank r takes r, r + world_size, ... so no item is taken twice and none is left out.
#include <mpify/abi.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// The indices rank `rank` of `world_size` takes of `size` items; none when there are fewer
/// items than ranks and `rank` is past them.
at::Tensor rank_rows(int rank, int world_size, std::int64_t size);

}  // namespace learner
MPIFY_END_NAMESPACE
