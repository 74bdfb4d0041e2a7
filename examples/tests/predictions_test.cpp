// get_preds, ClassificationInterpretation, lr_find and their pictures, alone and under
// in_ddp (with the functions of learner_group_functions.cpp); and under in_ddp, the
// Learner's gradient accumulation and EarlyStopping.
#include <mpify/learner/interpretation.hpp>
#include <mpify/learner/learner.hpp>
#include <mpify/learner/pictures.hpp>

#include "blob_data.hpp"
#include "learner_group_functions.hpp"

#include <torch/torch.h>

// After LibTorch: glog (which it includes) defines a CHECK macro of its own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

using namespace mpify::learner;
using namespace mpify_examples;
using namespace mpify_examples::testing;
using Catch::Matchers::Contains;

TEST_CASE("get_preds returns every item's output and loss in the data set's order", "[learner][preds]") {
    torch::manual_seed(4);
    auto model = std::make_shared<torch::nn::LinearImpl>(2, 3);
    LearnerOptions options;
    options.max_batches = 0;
    const DataSet valid = blobs(25, 2);
    Learner learn({blobs(40, 1), valid, 4, 7}, model, cross_entropy, {}, options);
    const Predictions preds = learn.get_preds();
    REQUIRE(preds.outputs.sizes() == at::IntArrayRef({25, 3}));
    CHECK(at::allclose(preds.outputs, learn.predict(valid.inputs)));
    CHECK(at::equal(preds.targets, valid.targets));
    for (std::int64_t i : {0, 7, 24})
        CHECK(preds.losses[i].item<double>() ==
              Approx(cross_entropy(preds.outputs.narrow(0, i, 1), valid.targets.narrow(0, i, 1)).item<double>()));
}

TEST_CASE("under in_ddp of 2 and 3, get_preds gives every rank the one-process predictions in order",
          "[learner][preds][ddp]") {
    const std::vector<at::Tensor> alone = predictions_of_25();
    for (int n : {2, 3}) {
        INFO(n << " ranks (25 items: not a multiple)");
        const std::vector<at::Tensor> ranks = mpify::in_ddp(n, predictions_of_25);
        REQUIRE(ranks.size() == 3);
        CHECK(at::equal(ranks[0], alone[0]));  // exactly: each row computed once, gathered by a sum with zeros
        CHECK(at::equal(ranks[1], alone[1]));
        CHECK(at::equal(ranks[2], alone[2]));
    }
}

TEST_CASE("with more ranks than validation items, get_preds and fit's validation count each item once",
          "[learner][preds][ddp]") {
    for (const std::int64_t items : {std::int64_t{1}, std::int64_t{2}}) {
        const std::vector<at::Tensor> alone = predict_and_fit_with_few_items(items);
        INFO(items << " validation item(s), 3 ranks: " << 3 - items << " of them with none");
        const std::vector<at::Tensor> ranks = mpify::in_ddp(3, predict_and_fit_with_few_items, items);
        REQUIRE(ranks.size() == 4);
        CHECK(at::equal(ranks[0], alone[0]));
        CHECK(at::equal(ranks[1], alone[1]));
        CHECK(ranks[2].item<double>() == Approx(ranks[3].item<double>()).epsilon(1e-5));
    }
}

TEST_CASE("ClassificationInterpretation counts confusions and finds the largest losses", "[learner][preds]") {
    Predictions preds;
    // Items: (truth, answer) = (0,0) (0,1) (1,1) (2,1) (2,1) (2,2); losses made up.
    preds.outputs = torch::tensor(
        {{3.0, 0.0, 0.0}, {0.0, 2.0, 0.0}, {0.0, 4.0, 0.0}, {0.0, 1.0, 0.0}, {0.0, 5.0, 0.0}, {0.0, 0.0, 2.0}});
    preds.targets = torch::tensor({0, 0, 1, 2, 2, 2}, torch::kLong);
    preds.losses = torch::tensor({0.1f, 2.0f, 0.05f, 1.5f, 5.0f, 0.2f});
    const ClassificationInterpretation interp(preds, {"a", "b", "c"});
    const ConfusionMatrix matrix = interp.confusion_matrix();
    CHECK(matrix.counts == std::vector<std::vector<std::int64_t>>{{1, 1, 0}, {0, 1, 0}, {0, 2, 1}});
    CHECK(matrix.accuracy() == Approx(0.5));
    const std::vector<Confusion> confused = matrix.most_confused();
    REQUIRE(confused.size() == 2);
    CHECK((confused[0].actual == "c" && confused[0].predicted == "b" && confused[0].count == 2));
    CHECK((confused[1].actual == "a" && confused[1].predicted == "b" && confused[1].count == 1));
    CHECK(matrix.most_confused(2).size() == 1);

    const std::vector<TopLoss> top = interp.top_losses(2);
    REQUIRE(top.size() == 2);
    CHECK((top[0].index == 4 && top[0].actual == "c" && top[0].predicted == "b"));
    CHECK(top[0].loss == Approx(5.0));
    CHECK(top[0].probability == Approx(std::exp(5.0) / (std::exp(5.0) + 2)));
    CHECK(top[1].index == 1);
    CHECK(interp.top_losses(100).size() == 6);

    const std::string svg = plot_confusion_matrix(matrix).text;
    CHECK_THAT(svg, Contains("accuracy 50.0 %") && Contains(">actual<") && Contains(">predicted<"));
    CHECK_THAT(plot_top_losses(top).text, Contains("b / c") && Contains("loss 5.00"));

    CHECK_THROWS_WITH(ClassificationInterpretation(preds, {"a", "b"}),
                      Contains("a classifier of the 2 classes named gives (items, 2)"));
}

TEST_CASE("lr_find sweeps rates geometrically, stops when the loss diverges, and puts the weights back",
          "[learner][lr_find]") {
    const LrFinderResult result = find_lr(32, 1e5);  // throws if the weights changed
    INFO("losses: " << Catch::Detail::stringify(result.losses));
    REQUIRE(result.lrs.size() >= 10);
    CHECK(result.lrs.front() == Approx(1e-7));
    CHECK(result.lrs[1] / result.lrs[0] == Approx(std::pow(1e5 / 1e-7, 1.0 / 59)));
    CHECK(result.diverged);  // rates in the thousands send cross-entropy away
    CHECK(result.lrs.size() < 60);
    CHECK(result.suggested_lr > 1e-5);
    CHECK(result.suggested_lr < 10);
    const auto lowest = std::min_element(result.losses.begin(), result.losses.end()) - result.losses.begin();
    CHECK(result.minimum_lr == Approx(result.lrs[static_cast<std::size_t>(lowest)] / 10));
    CHECK_THAT(plot_lr_find(result).text, Contains("valley"));

    LrFinderOptions backwards;
    backwards.start_lr = 1;
    backwards.end_lr = 0.1;
    Learner learn({blobs(64, 1), blobs(8, 2), 16, 7}, std::make_shared<torch::nn::LinearImpl>(2, 3), cross_entropy);
    CHECK_THROWS_WITH(learn.lr_find(backwards), Contains("must grow from start_lr"));
}

TEST_CASE("valley_lr is the middle of the longest falling stretch", "[learner][lr_find]") {
    // Falls from index 2 to 8, then rises.
    const std::vector<double> lrs = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    const std::vector<double> losses = {2, 2, 4.5, 4, 3.5, 3, 2.5, 2, 1.5, 3, 9};
    CHECK(valley_lr(lrs, losses) == 6);  // index 5: halfway from 2 to 8
    CHECK(valley_lr({}, {}) == 0);
}

TEST_CASE("under in_ddp of 2, lr_find suggests what one process with the global batch does, every rank alike",
          "[learner][lr_find][ddp]") {
    const LrFinderResult alone = find_lr(64, 1e5);
    const LrFinderResult ranks = mpify::in_ddp(2, find_lr, std::int64_t{32}, 1e5);  // ranks check each other
    REQUIRE(ranks.lrs.size() == alone.lrs.size());  // stopped at the same step
    for (std::size_t i = 0; i < alone.losses.size(); ++i)
        CHECK(ranks.losses[i] == Approx(alone.losses[i]).epsilon(1e-4));
    CHECK(ranks.suggested_lr == Approx(alone.suggested_lr).epsilon(0.01));
    CHECK(ranks.minimum_lr == Approx(alone.minimum_lr).epsilon(0.01));
}

TEST_CASE("under in_ddp of 2, accumulate = 2 trains as one process with four times the batch", "[learner][ddp]") {
    const std::vector<at::Tensor> alone = fit_accumulating(64, 1);
    const std::vector<at::Tensor> ranks = mpify::in_ddp(2, fit_accumulating, std::int64_t{16}, std::int64_t{2});
    for (std::size_t i = 0; i < alone.size(); ++i) {
        INFO("parameter " << i << ": " << ranks[i] << " vs " << alone[i]);
        CHECK(at::allclose(ranks[i], alone[i], 0, 1e-6));
    }
}

TEST_CASE("under in_ddp of 2 and 3, EarlyStopping stops every rank after the same epoch", "[learner][ddp]") {
    for (int n : {2, 3}) {
        INFO(n << " ranks");
        const std::int64_t epochs = mpify::in_ddp(n, epochs_before_early_stop);  // the ranks check each other
        CHECK(epochs >= 2);
        CHECK(epochs < 8);  // it did stop early: the decision was made, and made alike
    }
}
