#include "intro.hpp"

#include "cnn.hpp"

#include <data/fashion_mnist.hpp>
#include <mpify/learner/learner.hpp>
#include <mpify/learner/tensor_image.hpp>

#include <mpify/registry.hpp>

#include <torch/torch.h>

using namespace mpify::learner;

namespace mpify_examples {
namespace intro {
Result train(Config config) {
    torch::manual_seed(config.seed);
    ImageSet train_set = load_fashion_mnist(true);
    ImageSet test_set = load_fashion_mnist(false);
    DataLoaders data{
        {train_set.images, train_set.labels}, {test_set.images, test_set.labels}, config.batch_size, config.seed};
    LearnerOptions options;
    options.checkpoint_dir = config.checkpoint_dir;
    options.precision = config.bfloat16 ? Precision::bfloat16 : Precision::float32;
    Learner learn(
        data, std::make_shared<Cnn>(),
        [](const at::Tensor& out, const at::Tensor& y) { return torch::cross_entropy_loss(out, y); }, {accuracy()},
        options);
    if (!config.csv.empty()) learn.add_callback(std::make_shared<CsvLogger>(config.csv));
    if (config.kill_rank >= 0)
        learn.add_callback(std::make_shared<KillRankOnce>(config.kill_rank, config.kill_epoch, config.kill_batch));

    Result result;
    result.history = learn.fit_one_cycle(config.epochs, config.max_lr);
    const at::Tensor probabilities = learn.predict(test_set.images.narrow(0, 0, 8)).softmax(1);
    for (std::int64_t i = 0; i < 8; ++i) {
        const auto [confidence, predicted] = probabilities[i].max(0);
        const Prediction p{static_cast<int>(test_set.labels[i].item<std::int64_t>()),
                           static_cast<int>(predicted.item<std::int64_t>()), confidence.item<double>()};
        result.predictions.push_back(p);
        result.results.push_back({image_from_tensor(test_set.images[i]), class_names.at(p.label),
                                  class_names.at(p.predicted)});
    }
    for (std::int64_t i = 0; i < 12; ++i)
        result.batch.push_back({image_from_tensor(train_set.images[i]),
                                class_names.at(static_cast<std::size_t>(train_set.labels[i].item<std::int64_t>())),
                                ""});
    return result;
}

}  // namespace intro
}  // namespace mpify_examples

MPIFY_REGISTER(mpify_examples::intro::train);
