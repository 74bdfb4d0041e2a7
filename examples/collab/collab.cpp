#include "collab.hpp"

#include <mpify/learner/learner.hpp>

#include <mpify/registry.hpp>

#include <torch/torch.h>

using namespace mpify::learner;

namespace mpify_examples {
namespace collab {
namespace {

struct Ratings {
    DataSet train, valid;
    double noise_floor = 0;  // on the held-out part
};

// Every rank generates the same table from the same seed.
Ratings generate(const Config& c) {
    auto gen = at::detail::createCPUGenerator(c.seed);
    const auto normal = [&](std::vector<std::int64_t> shape, double std) {
        return torch::empty(shape).normal_(0, std, gen);
    };
    const at::Tensor user_factors = normal({c.users, c.hidden_factors}, 0.5);
    const at::Tensor item_factors = normal({c.items, c.hidden_factors}, 0.5);
    const at::Tensor user_bias = normal({c.users}, 0.3), item_bias = normal({c.items}, 0.5);
    const at::Tensor users = torch::randint(c.users, {c.ratings}, gen, torch::kLong);
    const at::Tensor items = torch::randint(c.items, {c.ratings}, gen, torch::kLong);
    const at::Tensor truth = 3.5 + user_bias.index_select(0, users) + item_bias.index_select(0, items) +
                             (user_factors.index_select(0, users) * item_factors.index_select(0, items)).sum(1);
    const at::Tensor ratings = truth + normal({c.ratings}, c.noise);
    const at::Tensor pairs = torch::stack({users, items}, 1);

    const std::int64_t held_out = c.ratings / 10;
    const std::int64_t kept = c.ratings - held_out;
    Ratings r;
    r.train = {pairs.narrow(0, 0, kept), ratings.narrow(0, 0, kept)};
    r.valid = {pairs.narrow(0, kept, held_out), ratings.narrow(0, kept, held_out)};
    r.noise_floor = (ratings - truth).narrow(0, kept, held_out).pow(2).mean().sqrt().item<double>();
    return r;
}

// fastai's DotProductBias: embeddings and biases for users and items, plus an offset
// that starts at the mean training rating.
struct DotProductBias : torch::nn::Module {
    DotProductBias(const Config& c, double mean_rating)
        : user_factors(register_module("user_factors", torch::nn::Embedding(c.users, c.factors))),
          item_factors(register_module("item_factors", torch::nn::Embedding(c.items, c.factors))),
          user_bias(register_module("user_bias", torch::nn::Embedding(c.users, 1))),
          item_bias(register_module("item_bias", torch::nn::Embedding(c.items, 1))),
          offset(register_parameter("offset", torch::full({1}, mean_rating))) {
        torch::NoGradGuard no_grad;
        for (auto* e : {&user_factors, &item_factors, &user_bias, &item_bias}) (*e)->weight.normal_(0, 0.01);
    }
    at::Tensor forward(const at::Tensor& pairs) {
        const at::Tensor u = pairs.select(1, 0), i = pairs.select(1, 1);
        return (user_factors(u) * item_factors(i)).sum(1) + user_bias(u).squeeze(1) + item_bias(i).squeeze(1) + offset;
    }
    torch::nn::Embedding user_factors, item_factors, user_bias, item_bias;
    at::Tensor offset;
};

}  // namespace

Result train(Config config) {
    torch::manual_seed(config.seed);
    const Ratings data = generate(config);
    const double mean_rating = data.train.targets.mean().item<double>();
    LearnerOptions options;
    options.weight_decay = config.weight_decay;
    Learner learn(
        {data.train, data.valid, config.batch_size, config.seed}, std::make_shared<DotProductBias>(config, mean_rating),
        [](const at::Tensor& out, const at::Tensor& y) { return torch::mse_loss(out, y); }, {rmse()}, options);
    if (!config.csv.empty()) learn.add_callback(std::make_shared<CsvLogger>(config.csv));

    Result result;
    result.history = learn.fit_one_cycle(config.epochs, config.max_lr);
    result.noise_floor = data.noise_floor;
    result.mean_baseline = (data.valid.targets - mean_rating).pow(2).mean().sqrt().item<double>();
    const at::Tensor guesses = learn.predict(data.valid.inputs.narrow(0, 0, 8));
    for (std::int64_t k = 0; k < 8; ++k)
        result.predictions.push_back({data.valid.inputs[k][0].item<std::int64_t>(),
                                      data.valid.inputs[k][1].item<std::int64_t>(),
                                      data.valid.targets[k].item<double>(), guesses[k].item<double>()});
    return result;
}

}  // namespace collab
}  // namespace mpify_examples

MPIFY_REGISTER(mpify_examples::collab::train);
