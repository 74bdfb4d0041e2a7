// Tensor-taking functions, in the test-functions library only (ATen is slow to compile).
#include "tensor_functions.hpp"

#include <ATen/ATen.h>

namespace in_library {

at::Tensor echo_tensor(at::Tensor t) { return t; }
MPIFY_REGISTER(echo_tensor);

std::vector<at::Tensor> rank_tensors(at::Tensor base) {
    return {base + mpify::local_rank(), at::full({2}, mpify::local_rank())};
}
MPIFY_REGISTER(rank_tensors);

}  // namespace in_library
