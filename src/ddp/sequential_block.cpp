// SequentialBlock's deep copy, and the module-by-module rebuild it shares with
// convert_sync_batchnorm.
#include <mpify/sequential_block.hpp>

#include <torch/nn/modules/container/any.h>

MPIFY_BEGIN_NAMESPACE

std::shared_ptr<torch::nn::Module> SequentialBlockImpl::clone(const c10::optional<c10::Device>& device) const {
    auto copy = std::make_shared<SequentialBlockImpl>();
    detail::push_transformed(*this, *copy, [&](const torch::nn::AnyModule& module) { return module.clone(device); });
    return copy;
}

namespace detail {

void push_transformed(const torch::nn::SequentialImpl& source, torch::nn::SequentialImpl& target,
                      const std::function<torch::nn::AnyModule(const torch::nn::AnyModule&)>& transform) {
    target.train(source.is_training());  // while empty: train() recurses
    const auto names = source.named_children();
    auto name = names.begin();
    for (const torch::nn::AnyModule& module : source) {
        target.push_back(name->key(), transform(module));
        ++name;
    }
}

}  // namespace detail

MPIFY_END_NAMESPACE
