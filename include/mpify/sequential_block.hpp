#pragma once
// A torch::nn::Sequential that can sit inside another Sequential. LibTorch's own cannot
// (AnyModule needs a forward that is not a template, and Sequential's is one); this one
// runs its modules in turn on one tensor:
//
//   torch::nn::Sequential model(torch::nn::Conv2d(1, 8, 3),
//                               mpify::SequentialBlock(torch::nn::BatchNorm2d(8), torch::nn::ReLU()));
#include <mpify/abi.hpp>
#include <mpify/detail/libtorch_generation.hpp>
#include <mpify/export.hpp>

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/container/sequential.h>

#include <functional>
#include <memory>

MPIFY_BEGIN_NAMESPACE

/// A Sequential with a forward of one tensor to one tensor, so that it nests.
class MPIFY_API SequentialBlockImpl : public torch::nn::SequentialImpl {
public:
    using torch::nn::SequentialImpl::SequentialImpl;

    /// Runs the modules in order, each on the previous one's output.
    at::Tensor forward(const at::Tensor& input) { return torch::nn::SequentialImpl::forward(input); }

    /// A deep copy that stays a SequentialBlock (the base class's would be a plain
    /// Sequential, which an enclosing Sequential's clone cannot hold), names kept.
    std::shared_ptr<torch::nn::Module> clone(const c10::optional<c10::Device>& device = c10::nullopt) const override;
};

/// Module holder: `mpify::SequentialBlock(module, module, ...)`, as torch::nn::Sequential.
TORCH_MODULE(SequentialBlock);

namespace detail {

/// Fills `target`, empty, with each of `source`'s modules passed through `transform`,
/// under the same names, and gives it `source`'s mode (set while `target` is empty, so
/// that each module keeps its own). What a deep copy and convert_sync_batchnorm share.
MPIFY_API void push_transformed(const torch::nn::SequentialImpl& source, torch::nn::SequentialImpl& target,
                                const std::function<torch::nn::AnyModule(const torch::nn::AnyModule&)>& transform);

}  // namespace detail

MPIFY_END_NAMESPACE
