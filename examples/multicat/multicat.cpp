#include "multicat.hpp"

#include <data/fashion_mnist.hpp>
#include <intro/intro.hpp>
#include <mpify/learner/learner.hpp>
#include <mpify/learner/tensor_image.hpp>

#include <mpify/registry.hpp>

#include <torch/torch.h>

using namespace mpify::learner;

namespace mpify_examples {
namespace multicat {
namespace {

// Pairs image i with a random partner; targets are multi-hot over the 10 classes.
// The same seed gives every rank the same pairs.
DataSet make_pairs(const ImageSet& images, std::int64_t count, std::uint64_t seed) {
    count = std::min(count, images.images.size(0));
    auto generator = at::detail::createCPUGenerator(seed);
    const at::Tensor first = torch::arange(count, torch::kLong);
    const at::Tensor partner = torch::randperm(images.images.size(0), generator, torch::kLong).narrow(0, 0, count);
    at::Tensor inputs = torch::cat({images.images.index_select(0, first), images.images.index_select(0, partner)}, 3);
    at::Tensor targets = torch::zeros({count, 10});
    targets.scatter_(1, images.labels.index_select(0, first).unsqueeze(1), 1.0);
    targets.scatter_(1, images.labels.index_select(0, partner).unsqueeze(1), 1.0);
    return {inputs, targets};
}

// Three conv blocks, then the strongest response anywhere in the image per channel:
// a class is present whichever half shows it.
struct PairNet : torch::nn::Module {
    PairNet()
        : conv1(register_module("conv1", torch::nn::Conv2d(1, 32, 3))),
          conv2(register_module("conv2", torch::nn::Conv2d(32, 64, 3))),
          conv3(register_module("conv3", torch::nn::Conv2d(64, 128, 3))),
          hidden(register_module("hidden", torch::nn::Linear(128, 128))),
          head(register_module("head", torch::nn::Linear(128, 10))) {}
    at::Tensor forward(const at::Tensor& input) {
        at::Tensor x = torch::max_pool2d(torch::relu(conv1(input)), 2);  // 13 x 27
        x = torch::max_pool2d(torch::relu(conv2(x)), 2);                 // 5 x 12
        x = torch::amax(torch::relu(conv3(x)), {2, 3});  // 3 x 10, then N x 128
        return head(torch::relu(hidden(x)));
    }
    torch::nn::Conv2d conv1, conv2, conv3;
    torch::nn::Linear hidden, head;
};

std::vector<int> label_set(const at::Tensor& row) {
    std::vector<int> labels;
    for (int c = 0; c < row.size(0); ++c)
        if (row[c].item<bool>()) labels.push_back(c);
    return labels;
}

// "Bag + Coat": the class names of a label set.
std::string names_of(const std::vector<int>& labels) {
    std::string text;
    for (int label : labels)
        text += (text.empty() ? "" : " + ") + intro::class_names.at(static_cast<std::size_t>(label));
    return text.empty() ? "(nothing)" : text;
}

}  // namespace

Result train(Config config) {
    torch::manual_seed(config.seed);
    const DataSet train_pairs = make_pairs(load_fashion_mnist(true), config.train_pairs, config.seed);
    const DataSet test_pairs = make_pairs(load_fashion_mnist(false), 10000, config.seed + 1);
    Learner learn({train_pairs, test_pairs, config.batch_size, config.seed}, std::make_shared<PairNet>(),
                  [](const at::Tensor& out, const at::Tensor& y) {
                      return torch::binary_cross_entropy_with_logits(out, y);
                  },
                  {accuracy_multi(config.threshold), exact_match(config.threshold)});
    if (!config.csv.empty()) learn.add_callback(std::make_shared<CsvLogger>(config.csv));

    Result result;
    result.history = learn.fit_one_cycle(config.epochs, config.max_lr);
    const at::Tensor predicted = learn.predict(test_pairs.inputs.narrow(0, 0, 8)).sigmoid().gt(config.threshold);
    for (std::int64_t i = 0; i < 8; ++i) {
        result.predictions.push_back({label_set(test_pairs.targets[i].gt(0.5)), label_set(predicted[i])});
        result.results.push_back({image_from_tensor(test_pairs.inputs[i]), names_of(result.predictions.back().labels),
                                  names_of(result.predictions.back().predicted)});
    }
    for (std::int64_t i = 0; i < 12; ++i)
        result.batch.push_back({image_from_tensor(train_pairs.inputs[i]),
                                names_of(label_set(train_pairs.targets[i].gt(0.5))), ""});
    return result;
}

}  // namespace multicat
}  // namespace mpify_examples

MPIFY_REGISTER(mpify_examples::multicat::train);
