#include "resnet.hpp"

#include "resnet_model.hpp"

#include <data/fashion_mnist.hpp>
#include <intro/intro.hpp>
#include <mpify/learner/interpretation.hpp>
#include <mpify/learner/learner.hpp>

#include <mpify/ddp.hpp>
#include <mpify/registry.hpp>
#include <mpify/sync_batch_norm.hpp>

#include <torch/torch.h>

#include <chrono>

using namespace mpify::learner;

namespace mpify_examples {
namespace resnet {
namespace {

template <class Norm>
Result train_with(const Config& config) {
    torch::manual_seed(config.seed);
    ImageSet train_set = load_fashion_mnist(true);
    ImageSet test_set = load_fashion_mnist(false);
    DataLoaders data{
        {train_set.images, train_set.labels}, {test_set.images, test_set.labels}, config.batch_size, config.seed};
    auto model = std::make_shared<SmallResNet<Norm>>();
    Learner learn(data, model,
                  [](const at::Tensor& out, const at::Tensor& y) { return torch::cross_entropy_loss(out, y); },
                  {accuracy()});
    if (!config.csv.empty()) learn.add_callback(std::make_shared<CsvLogger>(config.csv));

    Result result;
    for (const auto& module : model->modules(false))
        if (std::dynamic_pointer_cast<mpify::SyncBatchNorm2dImpl>(module)) ++result.sync_norms;
    LrFinderOptions sweep;
    sweep.iterations = config.finder_iterations;
    const auto finder_start = std::chrono::steady_clock::now();
    result.finder = learn.lr_find(sweep);
    result.finder_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - finder_start).count();
    result.max_lr = config.max_lr > 0 ? config.max_lr : result.finder.minimum_lr;
    result.history = learn.fit_one_cycle(config.epochs, result.max_lr);

    const auto interpretation = ClassificationInterpretation::from_learner(learn, intro::class_names);
    result.confusion = interpretation.confusion_matrix();
    result.top_losses = interpretation.top_losses(9, test_set.images);
    return result;
}

}  // namespace

Result train(Config config) {
    // One model type per case: SyncBatchNorm2d where ranks share a batch.
    if (mpify::ddp::active() && mpify::ddp::world_size() > 1) return train_with<mpify::SyncBatchNorm2d>(config);
    return train_with<torch::nn::BatchNorm2d>(config);
}

}  // namespace resnet
}  // namespace mpify_examples

MPIFY_REGISTER(mpify_examples::resnet::train);
