// The training layer the examples share: schedule, metrics, history, the loop itself.
#include <mpify/learner/learner.hpp>
#include <mpify/learner/one_cycle.hpp>

#include "line_data.hpp"

#include <torch/torch.h>

// After LibTorch: glog (which it includes) defines a CHECK macro of its own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

using namespace mpify::learner;
using namespace mpify_examples;
using Catch::Matchers::Contains;

TEST_CASE("one_cycle warms up to max_lr over a quarter then anneals with momentum opposite", "[learner]") {
    CHECK(one_cycle(1.0, 0.0).lr == Approx(1.0 / 25));
    CHECK(one_cycle(1.0, 0.0).momentum == Approx(0.95));
    CHECK(one_cycle(1.0, 0.25).lr == Approx(1.0));
    CHECK(one_cycle(1.0, 0.25).momentum == Approx(0.85));
    CHECK(one_cycle(1.0, 1.0).lr == Approx(1e-5));
    CHECK(one_cycle(1.0, 1.0).momentum == Approx(0.95));
    CHECK(one_cycle(1.0, 0.1).lr < one_cycle(1.0, 0.2).lr);
    CHECK(one_cycle(1.0, 0.5).lr > one_cycle(1.0, 0.9).lr);
}

TEST_CASE("metrics return sums and counts that add up over batches", "[learner]") {
    const at::Tensor logits = torch::tensor({{2.0, 0.0, 0.0}, {0.0, 3.0, 0.0}, {0.0, 0.0, 1.0}, {5.0, 0.0, 0.0}});
    const at::Tensor labels = torch::tensor({0, 1, 0, 0}, torch::kLong);
    const auto [correct, count] = accuracy().batch(logits, labels);
    CHECK(correct == 3);
    CHECK(count == 4);

    const at::Tensor multi = torch::tensor({{1.0, 0.0, 1.0}, {0.0, 1.0, 0.0}});
    const at::Tensor out = torch::tensor({{4.0, -4.0, 4.0}, {4.0, 4.0, -4.0}});  // row 2 wrong in one place
    CHECK((accuracy_multi().batch(out, multi) == std::pair{5.0, 6.0}));
    CHECK((exact_match().batch(out, multi) == std::pair{1.0, 2.0}));

    const Metric r = rmse();
    const auto [squared, n] = r.batch(torch::tensor({1.0, 2.0}), torch::tensor({1.0, 4.0}));
    CHECK(r.finish(squared / n) == Approx(std::sqrt(2.0)));
}

TEST_CASE("History::final names the metrics it has when asked for another", "[learner]") {
    History h;
    h.metric_names = {"accuracy"};
    CHECK_THROWS_WITH(h.final("accuracy"), Contains("no epoch was recorded"));
    h.epochs.push_back({1, 10, 0.5, 0.4, {0.8}, 1.0});
    CHECK(h.final("accuracy") == 0.8);
    CHECK(h.final("valid_loss") == 0.4);
    CHECK_THROWS_WITH(h.final("rmse"), Contains("recorded: train_loss, valid_loss, accuracy"));
}

TEST_CASE("MPIFY_LEARNER_MAX_BATCHES must be a non-negative integer", "[learner]") {
    ::setenv("MPIFY_LEARNER_MAX_BATCHES", "12", 1);
    CHECK(LearnerOptions::max_batches_from_environment() == 12);
    ::setenv("MPIFY_LEARNER_MAX_BATCHES", "lots", 1);
    CHECK_THROWS_WITH(LearnerOptions::max_batches_from_environment(), Contains("not \"lots\""));
    ::unsetenv("MPIFY_LEARNER_MAX_BATCHES");
    CHECK(LearnerOptions::max_batches_from_environment() == 0);
}

using mpify_examples::testing::line;

TEST_CASE("a Learner fits a line, records every epoch and writes them as CSV", "[learner]") {
    torch::manual_seed(0);
    const std::filesystem::path csv = std::filesystem::temp_directory_path() / "mpify_learner_test.csv";
    LearnerOptions options;
    options.max_batches = 0;
    Learner learn(
        {line(512, 1), line(128, 2), 32, 7}, std::make_shared<torch::nn::LinearImpl>(1, 1),
        [](const at::Tensor& out, const at::Tensor& y) { return torch::mse_loss(out, y); }, {rmse()}, options);
    learn.add_callback(std::make_shared<CsvLogger>(csv.string()));
    const History h = learn.fit_one_cycle(8, 0.3);

    REQUIRE(h.epochs.size() == 8);
    CHECK(h.world_size == 1);
    CHECK(h.epochs.front().batches == 16);
    CHECK(h.final("rmse") < 0.05);
    CHECK(h.final("rmse") < h.epochs.front().metrics.at(0));
    CHECK(h.final("valid_loss") == Approx(h.final("rmse") * h.final("rmse")).epsilon(1e-6));

    std::ifstream in(csv);
    std::stringstream text;
    text << in.rdbuf();
    CHECK_THAT(text.str(), Contains("epoch,batches,train_loss,valid_loss,rmse,seconds,world_size\n1,16,"));
    CHECK_THAT(text.str(), Contains("\n8,16,"));
    std::filesystem::remove(csv);
}

TEST_CASE("max_batches caps the batches of every epoch", "[learner]") {
    LearnerOptions options;
    options.max_batches = 3;
    Learner learn(
        {line(512, 1), line(128, 2), 32, 7}, std::make_shared<torch::nn::LinearImpl>(1, 1),
        [](const at::Tensor& out, const at::Tensor& y) { return torch::mse_loss(out, y); }, {}, options);
    const History h = learn.fit(2, 0.01);
    REQUIRE(h.epochs.size() == 2);
    CHECK(h.epochs.back().batches == 3);
    CHECK(h.batch_losses.size() == 6);  // every batch's loss, for plot_losses
    CHECK_THROWS_WITH(learn.fit(0, 0.01), Contains("epochs must be at least 1"));
}

TEST_CASE("accumulate = 2 trains as one batch of twice the size", "[learner]") {
    // 200 samples: batches of 64 (64, 64, 64, 8), or of 32 in groups of 2 (the last alone).
    const auto train = [](std::int64_t batch_size, std::int64_t accumulate) {
        torch::manual_seed(0);
        auto model = std::make_shared<torch::nn::LinearImpl>(1, 1);
        LearnerOptions options;
        options.max_batches = 0;
        options.accumulate = accumulate;
        Learner learn(
            {line(200, 1), line(64, 2), batch_size, 7}, model,
            [](const at::Tensor& out, const at::Tensor& y) { return torch::mse_loss(out, y); }, {}, options);
        const History h = learn.fit(2, 0.05);
        CHECK(h.batch_losses.size() == static_cast<std::size_t>(2 * ((200 + batch_size - 1) / batch_size)));
        return std::vector<at::Tensor>{model->weight.detach().clone(), model->bias.detach().clone()};
    };
    const std::vector<at::Tensor> whole = train(64, 1), accumulated = train(32, 2), small = train(32, 1);
    for (std::size_t i = 0; i < whole.size(); ++i) {
        INFO("parameter " << i << ": " << whole[i] << " vs " << accumulated[i]);
        CHECK(at::allclose(accumulated[i], whole[i], 0, 1e-6));
    }
    CHECK_FALSE(at::allclose(small[0], whole[0], 0, 1e-6));  // a step every small batch is another training

    LearnerOptions none;
    none.accumulate = 0;
    Learner learn(
        {line(64, 1), line(64, 2), 32, 7}, std::make_shared<torch::nn::LinearImpl>(1, 1),
        [](const at::Tensor& out, const at::Tensor& y) { return torch::mse_loss(out, y); }, {}, none);
    CHECK_THROWS_WITH(learn.fit(1, 0.01), Contains("LearnerOptions::accumulate is 0; it must be at least 1"));
}

TEST_CASE("EarlyStopping ends a fit once its monitor stops improving; SaveModel keeps the best epoch's model",
          "[learner]") {
    CHECK(lower_is_better("valid_loss"));
    CHECK(lower_is_better("rmse"));
    CHECK_FALSE(lower_is_better("accuracy"));
    const auto mse = [](const at::Tensor& out, const at::Tensor& y) { return torch::mse_loss(out, y); };
    const auto fit_with = [&](std::shared_ptr<Callback> callback, std::shared_ptr<torch::nn::LinearImpl> model) {
        LearnerOptions options;
        options.max_batches = 0;
        Learner learn({line(256, 1), line(128, 2), 32, 7}, model, mse, {rmse()}, options);
        learn.add_callback(std::move(callback));
        return learn.fit(6, 0.1);
    };
    torch::manual_seed(0);
    // No gain can beat a min_delta this large: the first epoch is the best, the second stops it.
    CHECK(fit_with(std::make_shared<EarlyStopping>("valid_loss", 1e9, 1), std::make_shared<torch::nn::LinearImpl>(1, 1))
              .epochs.size() == 2);
    CHECK(fit_with(std::make_shared<EarlyStopping>("rmse", 1e9, 3), std::make_shared<torch::nn::LinearImpl>(1, 1))
              .epochs.size() == 4);
    CHECK(fit_with(std::make_shared<EarlyStopping>("valid_loss", -1e9, 1),  // every epoch "improves"
                   std::make_shared<torch::nn::LinearImpl>(1, 1))
              .epochs.size() == 6);
    CHECK_THROWS_WITH(EarlyStopping("valid_loss", 0, 0), Contains("patience is 0"));

    const std::filesystem::path saved =
        std::filesystem::temp_directory_path() / ("mpify_save_model_" + std::to_string(::getpid()) + ".pt");
    const History h = fit_with(std::make_shared<SaveModel>(saved.string(), "valid_loss"),
                               std::make_shared<torch::nn::LinearImpl>(1, 1));
    double best = h.epochs.front().valid_loss;
    for (const EpochRecord& epoch : h.epochs) best = std::min(best, epoch.valid_loss);
    auto loaded = std::make_shared<torch::nn::LinearImpl>(1, 1);
    load_model(saved.string(), *loaded);
    const DataSet valid = line(128, 2);
    torch::NoGradGuard no_grad;
    CHECK(torch::mse_loss(loaded->forward(valid.inputs), valid.targets).item<double>() == Approx(best).epsilon(1e-5));
    std::filesystem::remove(saved);
}
