// SequentialBlock's deep copy.
#include <mpify/sequential_block.hpp>

#include <torch/nn/modules/container/any.h>

MPIFY_BEGIN_NAMESPACE

std::shared_ptr<torch::nn::Module> SequentialBlockImpl::clone(const c10::optional<c10::Device>& device) const {
    auto copy = std::make_shared<SequentialBlockImpl>();
    copy->train(is_training());  // while empty: train() recurses, the copies keep their own modes
    const auto names = named_children();
    auto name = names.begin();
    for (const torch::nn::AnyModule& module : *this) {
        copy->push_back(name->key(), module.clone(device));
        ++name;
    }
    return copy;
}

MPIFY_END_NAMESPACE
