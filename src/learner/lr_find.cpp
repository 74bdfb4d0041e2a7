// Learner::lr_find: fastai's learning-rate finder, the same on every rank of a group.
#include <mpify/learner/learner.hpp>

#include <mpify/ddp.hpp>
#include <mpify/distributed_sampler.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

MPIFY_BEGIN_NAMESPACE
namespace learner {

double valley_lr(const std::vector<double>& lrs, const std::vector<double>& losses) {
    const std::size_t n = std::min(lrs.size(), losses.size());
    if (n == 0) return 0;
    // falling[i]: the length of the longest decreasing subsequence that ends at i.
    std::vector<std::size_t> falling(n, 1);
    std::size_t end = 0;
    for (std::size_t i = 1; i < n; ++i) {
        for (std::size_t j = 0; j < i; ++j)
            if (losses[i] < losses[j]) falling[i] = std::max(falling[i], falling[j] + 1);
        if (falling[i] > falling[end]) end = i;
    }
    // Its start, taken as if the subsequence were contiguous (the curve is smoothed).
    const std::size_t start = end + 1 - falling[end];
    return lrs[start + (end - start) / 2];
}

LrFinderResult Learner::lr_find(LrFinderOptions sweep) {
    if (!(sweep.start_lr > 0) || !(sweep.end_lr > sweep.start_lr) || sweep.iterations < 2)
        throw std::invalid_argument("Learner::lr_find: the rates must grow from start_lr > 0 (" +
                                    std::to_string(sweep.start_lr) + ") to end_lr (" + std::to_string(sweep.end_lr) +
                                    ") over at least 2 iterations (" + std::to_string(sweep.iterations) + ")");
    if (data_.train.size() == 0) throw std::invalid_argument("Learner::lr_find: the training set is empty");
    // What the sweep changes, to put back: the weights and buffers (the optimizer is its own).
    std::vector<at::Tensor> saved;
    for (const at::Tensor& p : model_->parameters()) saved.push_back(p.detach().clone());
    for (const at::Tensor& b : model_->buffers()) saved.push_back(b.clone());

    torch::optim::AdamW optimizer(model_->parameters(),
                                  torch::optim::AdamWOptions(sweep.start_lr).weight_decay(options_.weight_decay));
    mpify::DistributedSampler sampler(data_.train.size(), rank_, world_size_, true, data_.seed);
    const std::int64_t batch = data_.batch_size;
    const std::int64_t batches = (sampler.shard_size() + batch - 1) / batch;
    const double growth = std::pow(sweep.end_lr / sweep.start_lr, 1.0 / (sweep.iterations - 1));
    constexpr double beta = 0.98;  // the loss's moving average, as fastai smooths it
    double average = 0, best = std::numeric_limits<double>::infinity();

    mpify::GradScaler scaler(scaler_options());  // the sweep's own, as its optimizer is
    LrFinderResult result;
    model_->train();
    at::Tensor order;
    for (int step = 0; step < sweep.iterations; ++step) {
        const std::int64_t b = step % batches;
        if (b == 0) {  // a new pass over the shard, in a new order
            sampler.set_epoch(step / batches);
            order = torch::tensor(sampler.indices(), torch::kLong);
        }
        const double lr = sweep.start_lr * std::pow(growth, step);
        for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
        const at::Tensor rows = order.narrow(0, b * batch, std::min(batch, order.size(0) - b * batch));
        optimizer.zero_grad();
        const auto [inputs, targets] = batch_of(data_.train, rows);
        const at::Tensor loss = training_loss(inputs, targets);
        scaler.scale(loss).backward();
        scaler.step(optimizer);
        scaler.update();
        // The global batch's loss: every rank decides on the same number.
        at::Tensor sums =
            torch::tensor({loss.item<double>() * static_cast<double>(rows.size(0)), static_cast<double>(rows.size(0))},
                          torch::kDouble);
        if (ddp_model_) mpify::ddp::all_reduce(sums);
        const double global = sums[0].item<double>() / sums[1].item<double>();
        average = beta * average + (1 - beta) * global;
        const double smoothed = average / (1 - std::pow(beta, step + 1));
        result.lrs.push_back(lr);
        result.losses.push_back(smoothed);
        best = std::min(best, smoothed);
        if (!std::isfinite(smoothed) || (sweep.stop_factor > 0 && smoothed > sweep.stop_factor * best)) {
            result.diverged = true;
            break;
        }
    }

    torch::NoGradGuard no_grad;
    std::size_t next = 0;
    for (at::Tensor& p : model_->parameters()) {
        p.copy_(saved[next++]);
        p.mutable_grad() = at::Tensor();
    }
    for (at::Tensor& b : model_->buffers()) b.copy_(saved[next++]);
    result.suggested_lr = valley_lr(result.lrs, result.losses);
    if (!result.losses.empty()) {
        const auto lowest = std::min_element(result.losses.begin(), result.losses.end());
        result.minimum_lr = result.lrs[static_cast<std::size_t>(lowest - result.losses.begin())] / 10;
    }
    return result;
}

}  // namespace learner
MPIFY_END_NAMESPACE
