#pragma once
// SyncBatchNorm for LibTorch's C++ frontend: BatchNorm whose training statistics are
// those of the whole global batch, over every rank of the active DdpGuard's group.
//
// Built and loaded exactly as torch::nn::BatchNorm1d/2d/3d (same options, same parameter
// and buffer names), so a model swaps them in by type and loads a BatchNorm model's weights:
//
//   template <class Norm> struct Block : torch::nn::Module { ... Norm norm{nullptr}; ... };
//   Block<torch::nn::BatchNorm2d>  alone;        // one process
//   Block<mpify::SyncBatchNorm2d>  distributed;  // inside in_ddp
//
// A torch::nn::Sequential converts with mpify::convert_sync_batchnorm. In training, each
// forward makes one all-reduce (per channel: sum, sum of squares, count) and each backward
// that computes the input's gradient one more (the two sums it needs); in eval mode, and
// outside a group,
// a SyncBatchNorm is a plain BatchNorm and talks to no one.
#include <mpify/abi.hpp>
#include <mpify/detail/libtorch_generation.hpp>
#include <mpify/export.hpp>
#include <mpify/sequential_block.hpp>

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>

#include <cstddef>
#include <ostream>

MPIFY_BEGIN_NAMESPACE
namespace detail {

/// The forward of every SyncBatchNorm: `module_name` ("mpify::SyncBatchNorm2d") names it
/// in errors and in the record of collective calls. Updates num_batches_tracked and the
/// running statistics as torch::nn::BatchNorm does, with the global batch's statistics.
MPIFY_API at::Tensor sync_batch_norm(const char* module_name, const at::Tensor& input,
                                     const torch::nn::BatchNormOptions& options, bool training,
                                     const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& running_mean,
                                     const at::Tensor& running_var, const at::Tensor& num_batches_tracked);

/// Throws mpify::UsageError, naming the module, for an input whose number of dimensions
/// a `dims`-d batch norm cannot take (2 or 3 for 1d, 4 for 2d, 5 for 3d).
MPIFY_API void check_batch_norm_dims(const char* module_name, std::size_t dims, const at::Tensor& input);

/// "mpify::SyncBatchNorm2d(8, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)".
MPIFY_API void print_batch_norm(std::ostream& stream, const char* module_name,
                                const torch::nn::BatchNormOptions& options);

}  // namespace detail

/// What SyncBatchNorm1d/2d/3d share: torch's NormImplBase (parameters `weight` and `bias`,
/// buffers `running_mean`, `running_var`, `num_batches_tracked`, `options`, `reset()`...)
/// with a forward that normalizes over the global batch in training.
template <std::size_t D, class Derived>
class SyncBatchNormImplBase : public torch::nn::NormImplBase<D, Derived, torch::nn::BatchNormOptions> {
public:
    using torch::nn::NormImplBase<D, Derived, torch::nn::BatchNormOptions>::NormImplBase;

    /// Normalizes `input` (N, C, ...). In training inside a DdpGuard of more than one rank:
    /// with the mean and variance of every rank's batch together (ranks' batch sizes may
    /// differ, an empty one included), running statistics updated with them as one process
    /// holding the whole batch would; backward gives the gradients of that normalization.
    /// Every rank of the group must run forward (and backward) through the same layers in
    /// the same order. Otherwise: exactly torch::nn::BatchNorm's forward.
    at::Tensor forward(const at::Tensor& input) {
        this->_check_input_dim(input);
        return detail::sync_batch_norm(module_name(), input, this->options, this->is_training(), this->weight,
                                       this->bias, this->running_mean, this->running_var, this->num_batches_tracked);
    }

    /// Prints the module as torch's BatchNorm does, under its own name.
    void pretty_print(std::ostream& stream) const override {
        detail::print_batch_norm(stream, module_name(), this->options);
    }

protected:
    /// Refuses an input of the wrong number of dimensions, as BatchNorm does, naming this module.
    void _check_input_dim(const at::Tensor& input) override { detail::check_batch_norm_dims(module_name(), D, input); }

private:
    static const char* module_name() {
        if constexpr (D == 1) return "mpify::SyncBatchNorm1d";
        else if constexpr (D == 2) return "mpify::SyncBatchNorm2d";
        else return "mpify::SyncBatchNorm3d";
    }
};

/// SyncBatchNorm over (N, C) or (N, C, L) inputs: torch::nn::BatchNorm1d's counterpart.
class SyncBatchNorm1dImpl : public SyncBatchNormImplBase<1, SyncBatchNorm1dImpl> {
public:
    using SyncBatchNormImplBase<1, SyncBatchNorm1dImpl>::SyncBatchNormImplBase;
};
/// SyncBatchNorm over (N, C, H, W) inputs: torch::nn::BatchNorm2d's counterpart.
class SyncBatchNorm2dImpl : public SyncBatchNormImplBase<2, SyncBatchNorm2dImpl> {
public:
    using SyncBatchNormImplBase<2, SyncBatchNorm2dImpl>::SyncBatchNormImplBase;
};
/// SyncBatchNorm over (N, C, D, H, W) inputs: torch::nn::BatchNorm3d's counterpart.
class SyncBatchNorm3dImpl : public SyncBatchNormImplBase<3, SyncBatchNorm3dImpl> {
public:
    using SyncBatchNormImplBase<3, SyncBatchNorm3dImpl>::SyncBatchNormImplBase;
};

/// Module holders, constructed as torch::nn::BatchNorm1d/2d/3d: `SyncBatchNorm2d(64)` or
/// `SyncBatchNorm2d(torch::nn::BatchNormOptions(64).momentum(0.01))`.
TORCH_MODULE(SyncBatchNorm1d);
TORCH_MODULE(SyncBatchNorm2d);
TORCH_MODULE(SyncBatchNorm3d);

/// A new Sequential with the modules of `model`, in order and under the same names, every
/// torch::nn::BatchNorm1d/2d/3d replaced by the SyncBatchNorm of the same options, its
/// weights, running statistics and training mode copied. Nested Sequentials (a
/// SequentialBlock, or another subclass of SequentialImpl) are converted too and come back
/// as SequentialBlocks: a subclass's forward other than "each module in turn" is not kept.
/// The other modules are shared with `model`, not copied. A module with typed members
/// cannot have them swapped: let it choose its norm type (a template parameter, a factory).
MPIFY_API torch::nn::Sequential convert_sync_batchnorm(const torch::nn::Sequential& model);

MPIFY_END_NAMESPACE
