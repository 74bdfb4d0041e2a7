// convert_sync_batchnorm: a Sequential's BatchNorms replaced by SyncBatchNorms. A Sequential
// cannot replace a child in place (its AnyModule list and its registered children would
// disagree), so a new Sequential is built, module by module, under the same names.
#include <mpify/sequential_block.hpp>
#include <mpify/sync_batch_norm.hpp>

#include <torch/nn/modules/container/any.h>
#include <torch/utils.h>

#include <iterator>
#include <memory>
#include <string>

MPIFY_BEGIN_NAMESPACE
namespace {

/// `sync`, a new SyncBatchNorm, takes `original`'s weights, statistics and mode.
template <class Sync, class Original>
Sync copied_norm(const Original& original) {
    Sync sync(original->options);
    torch::NoGradGuard no_grad;
    if (original->options.affine()) {
        sync->weight.copy_(original->weight);
        sync->bias.copy_(original->bias);
        sync->weight.set_requires_grad(original->weight.requires_grad());
        sync->bias.set_requires_grad(original->bias.requires_grad());
    }
    if (original->options.track_running_stats()) {
        sync->running_mean.copy_(original->running_mean);
        sync->running_var.copy_(original->running_var);
        sync->num_batches_tracked.copy_(original->num_batches_tracked);
    }
    sync->train(original->is_training());
    return sync;
}

template <class Target>
std::shared_ptr<Target> converted_modules(const torch::nn::SequentialImpl& source, std::shared_ptr<Target> target);

/// `module` converted: a SyncBatchNorm for a BatchNorm, a converted Sequential for a
/// Sequential, else `module` itself.
torch::nn::AnyModule converted(const torch::nn::AnyModule& module) {
    const std::shared_ptr<torch::nn::Module> held = module.ptr();
    if (auto norm = std::dynamic_pointer_cast<torch::nn::BatchNorm1dImpl>(held))
        return torch::nn::AnyModule(copied_norm<SyncBatchNorm1d>(norm));
    if (auto norm = std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(held))
        return torch::nn::AnyModule(copied_norm<SyncBatchNorm2d>(norm));
    if (auto norm = std::dynamic_pointer_cast<torch::nn::BatchNorm3dImpl>(held))
        return torch::nn::AnyModule(copied_norm<SyncBatchNorm3d>(norm));
    if (auto nested = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(held))
        return torch::nn::AnyModule(
            SequentialBlock(converted_modules(*nested, std::make_shared<SequentialBlockImpl>())));
    return module;
}

/// `target`, empty, given `source`'s modules converted, under their names, and its mode.
template <class Target>
std::shared_ptr<Target> converted_modules(const torch::nn::SequentialImpl& source, std::shared_ptr<Target> target) {
    detail::push_transformed(source, *target, converted);
    return target;
}

}  // namespace

torch::nn::Sequential convert_sync_batchnorm(const torch::nn::Sequential& model) {
    return torch::nn::Sequential(converted_modules(*model, std::make_shared<torch::nn::SequentialImpl>()));
}

MPIFY_END_NAMESPACE
