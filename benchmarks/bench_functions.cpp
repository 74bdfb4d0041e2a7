// Functions benchmarks ranch from a shared library, so that a notebook cell and a
// compiled program call the very same function (kernel_bench.py, compiled_ranch.cpp,
// soak_bench.cpp).
#include <mpify/ddp.hpp>
#include <mpify/mpify.hpp>

#include <ATen/ATen.h>

namespace mpify_bench {

void noop() {}
MPIFY_REGISTER(noop);

/// The all-reduce of one number: the smallest collective, in a DDP group.
double allreduce_rank() {
    at::Tensor t = at::full({1}, static_cast<double>(mpify::ddp::rank()), at::kDouble);
    mpify::ddp::all_reduce(t);
    return t.item<double>();
}
MPIFY_REGISTER(allreduce_rank);

}  // namespace mpify_bench
