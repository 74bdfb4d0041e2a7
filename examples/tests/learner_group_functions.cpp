#include "learner_group_functions.hpp"

#include "blob_data.hpp"

#include <learner/checkpoint_on_ranks.hpp>

#include <mpify/learner/learner.hpp>

#include <mpify/ddp.hpp>

#include <torch/torch.h>

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

using namespace mpify::learner;

namespace mpify_examples::testing {
namespace {

std::shared_ptr<torch::nn::LinearImpl> classifier() {
    torch::manual_seed(4);
    return std::make_shared<torch::nn::LinearImpl>(2, 3);
}

// In a group, throws unless every rank stopped after the same number of `what`.
void same_on_every_rank(std::int64_t count, const char* what) {
    if (!mpify::ddp::active()) return;
    at::Tensor most = torch::tensor(count), least = torch::tensor(count);
    mpify::ddp::all_reduce(most, c10d::ReduceOp::MAX);
    mpify::ddp::all_reduce(least, c10d::ReduceOp::MIN);
    if (most.item<std::int64_t>() != least.item<std::int64_t>())
        throw std::runtime_error("the ranks stopped after " + std::to_string(least.item<std::int64_t>()) + " and " +
                                 std::to_string(most.item<std::int64_t>()) + " " + what);
}

LearnerOptions all_batches() {
    LearnerOptions options;
    options.max_batches = 0;
    return options;
}

}  // namespace

std::vector<at::Tensor> predictions_of_25() {
    Learner learn({blobs(40, 1), blobs(25, 2), 4, 7}, classifier(), cross_entropy, {}, all_batches());
    const Predictions preds = learn.get_preds();
    return {preds.outputs, preds.losses, preds.targets};
}
MPIFY_REGISTER(predictions_of_25);

std::vector<at::Tensor> predict_and_fit_with_few_items(std::int64_t valid_items) {
    Learner learn({blobs(40, 1), blobs(valid_items, 2), 4, 7}, classifier(), cross_entropy, {}, all_batches());
    const Predictions before = learn.get_preds();
    const History history = learn.fit(1, 0.05);
    const Predictions after = learn.get_preds();
    return {before.outputs, before.losses, torch::tensor(history.final("valid_loss"), torch::kDouble),
            after.losses.to(torch::kDouble).mean()};
}
MPIFY_REGISTER(predict_and_fit_with_few_items);

LrFinderResult find_lr(std::int64_t batch_size, double end_lr) {
    auto model = classifier();
    Learner learn({blobs(512, 1), blobs(32, 2), batch_size, 7}, model, cross_entropy, {}, all_batches());
    const at::Tensor weight_before = model->weight.detach().clone();
    LrFinderOptions sweep;
    sweep.end_lr = end_lr;
    sweep.iterations = 60;
    const LrFinderResult result = learn.lr_find(sweep);
    if (!at::equal(model->weight, weight_before)) throw std::runtime_error("lr_find left the weights changed");
    same_on_every_rank(static_cast<std::int64_t>(result.lrs.size()), "steps");
    return result;
}
MPIFY_REGISTER(find_lr);

std::vector<at::Tensor> fit_accumulating(std::int64_t batch_size, std::int64_t accumulate) {
    auto model = classifier();
    LearnerOptions options = all_batches();
    options.accumulate = accumulate;
    Learner learn({blobs(200, 1), blobs(32, 2), batch_size, 7}, model, cross_entropy, {}, options);
    learn.fit(2, 0.05);
    return {model->weight.detach().clone(), model->bias.detach().clone()};
}
MPIFY_REGISTER(fit_accumulating);

std::int64_t epochs_before_early_stop() {
    Learner learn({blobs(400, 1), blobs(101, 2), 16, 7}, classifier(), cross_entropy, {accuracy()}, all_batches());
    learn.add_callback(std::make_shared<EarlyStopping>("accuracy", 0.01, 1));
    const auto epochs = static_cast<std::int64_t>(learn.fit(8, 0.05).epochs.size());
    same_on_every_rank(epochs, "epochs");
    return epochs;
}
MPIFY_REGISTER(epochs_before_early_stop);

namespace {

// What epoch_2_in_parts sees of its fit: the loss function notes each training batch's
// sample numbers (the targets' second column; -1 in validation), the callback keeps them
// once the batch is done, with its loss, and stops the fit where asked.
struct EpochTwoWatch : Callback {
    explicit EpochTwoWatch(std::int64_t stop) : stop_batch(stop) {}
    void before_epoch(const Learner&, int epoch, std::int64_t) override { current_epoch = epoch; }
    void after_batch(const Learner&, std::int64_t batch, double loss) override {
        if (current_epoch != 2) {
            pending.clear();
            return;
        }
        if (batch == stop_batch) throw std::runtime_error("stopped on purpose");
        samples.insert(samples.end(), pending.begin(), pending.end());
        pending.clear();
        loss_sum += loss;
        ++batches;
    }
    std::int64_t stop_batch;
    int current_epoch = 0;
    std::vector<std::int64_t> pending, samples;
    double loss_sum = 0;
    std::int64_t batches = 0;
};

}  // namespace

std::vector<at::Tensor> epoch_2_in_parts(std::string dir, std::int64_t stop_batch) {
    constexpr std::int64_t n = 50;
    auto gen = at::detail::createCPUGenerator(11);
    const at::Tensor x = torch::rand({n, 1}, gen);
    const at::Tensor numbers = torch::arange(n, torch::kFloat).reshape({n, 1});
    const DataSet train{x, torch::cat({3 * x - 1, numbers}, 1)};
    const at::Tensor vx = torch::rand({8, 1}, gen);
    const DataSet valid{vx, torch::cat({3 * vx - 1, torch::full({8, 1}, -1.0)}, 1)};
    auto watch = std::make_shared<EpochTwoWatch>(stop_batch);
    auto loss = [watch](const at::Tensor& out, const at::Tensor& target) {
        const at::Tensor number = target.select(1, 1).to(torch::kLong);
        if (number.numel() > 0 && number[0].item<std::int64_t>() >= 0)
            for (std::int64_t i = 0; i < number.numel(); ++i) watch->pending.push_back(number[i].item<std::int64_t>());
        return torch::mse_loss(out, target.narrow(1, 0, 1));
    };
    torch::manual_seed(3);
    LearnerOptions options = all_batches();
    options.checkpoint_dir = dir;
    options.checkpoint_every = 1;
    Learner learn({train, valid, 4, 7}, std::make_shared<torch::nn::LinearImpl>(1, 1), loss, {}, options);
    learn.add_callback(watch);
    double train_loss = -1;
    try {
        train_loss = learn.fit(2, 0.05).epochs.back().train_loss;
    } catch (const std::runtime_error& e) {
        if (std::string(e.what()) != "stopped on purpose") throw;
    }
    at::Tensor counts = torch::zeros({n}, torch::kLong);
    for (std::int64_t sample : watch->samples) counts[sample] += 1;
    at::Tensor sums = torch::tensor({watch->loss_sum, static_cast<double>(watch->batches)}, torch::kDouble);
    if (mpify::ddp::active()) {
        mpify::ddp::all_reduce(counts);
        mpify::ddp::all_reduce(sums);
    }
    return {counts, torch::cat({sums, torch::tensor({train_loss}, torch::kDouble)})};
}
MPIFY_REGISTER(epoch_2_in_parts);

std::vector<std::int64_t> checkpoint_on_every_rank(std::string path, std::string their_path) {
    const int rank = mpify::ddp::rank();
    const auto calls_so_far = [] {
        const std::vector<mpify::CollectiveCall> calls = mpify::ddp::recorded_calls();
        return calls.empty() ? std::int64_t{0} : static_cast<std::int64_t>(calls.back().sequence);
    };
    const std::int64_t calls_before = calls_so_far();
    const std::optional<CheckpointBytes> bytes =
        open_on_every_rank(rank == 0 ? path : their_path, /*missing_is_none=*/false, rank, /*in_group=*/true);
    const std::int64_t calls = calls_so_far() - calls_before;
    std::string got(bytes->size(), '\0');
    got.resize(bytes->read_at(0, got.data(), got.size()));
    std::ifstream file(path, std::ios::binary);
    const std::string truth{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    at::Tensor same = torch::tensor({static_cast<std::int64_t>(got == truth)}, torch::kLong);
    mpify::ddp::all_reduce(same);
    return {same.item<std::int64_t>(), calls};
}
MPIFY_REGISTER(checkpoint_on_every_rank);

}  // namespace mpify_examples::testing
