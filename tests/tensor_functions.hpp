#pragma once
#include <mpify/mpify.hpp>
#include <mpify/tensor.hpp>

#include <vector>

namespace in_library {
at::Tensor echo_tensor(at::Tensor t);
std::vector<at::Tensor> rank_tensors(at::Tensor base);
}  // namespace in_library
