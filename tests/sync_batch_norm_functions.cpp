#include "sync_batch_norm_functions.hpp"

#include <mpify/torch.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace ddp_test {
namespace {

template <int D>
struct Norms;
template <>
struct Norms<1> {
    using Plain = torch::nn::BatchNorm1d;
    using Sync = mpify::SyncBatchNorm1d;
};
template <>
struct Norms<2> {
    using Plain = torch::nn::BatchNorm2d;
    using Sync = mpify::SyncBatchNorm2d;
};
template <>
struct Norms<3> {
    using Plain = torch::nn::BatchNorm3d;
    using Sync = mpify::SyncBatchNorm3d;
};

constexpr std::int64_t channels = 3;

/// A batch of `n` for a D-dimensional norm: 1d takes (N, C, L), or (N, C) when `flat`.
std::vector<std::int64_t> batch_shape(int dims, std::int64_t n, bool flat) {
    if (dims == 1) return flat ? std::vector<std::int64_t>{n, channels} : std::vector<std::int64_t>{n, channels, 5};
    if (dims == 2) return {n, channels, 3, 4};
    return {n, channels, 2, 3, 2};
}

/// A model with its norms as typed members: its norm type is a template parameter.
template <class Norm>
struct NormPair : torch::nn::Module {
    NormPair() {
        first = register_module("first", Norm(channels));
        second = register_module("second", Norm(torch::nn::BatchNormOptions(channels).momentum(c10::nullopt)));
    }
    at::Tensor forward(const at::Tensor& x) { return second(torch::tanh(first(x)) * 2); }
    Norm first{nullptr}, second{nullptr};
};

/// Weights other than BatchNorm's 1 and 0, so that their gradients matter.
void randomize_affine(torch::nn::Module& model) {
    torch::NoGradGuard no_grad;
    for (auto& p : model.named_parameters()) {
        // torch::nn::init's, not Tensor::uniform_'s inline default generator, which GCC's
        // sanitizer builds warn of as maybe uninitialized.
        if (p.key().find("weight") != std::string::npos) torch::nn::init::uniform_(p.value(), 0.5, 1.5);
        else torch::nn::init::normal_(p.value(), 0, 0.5);
    }
}

double largest(const at::Tensor& a, const at::Tensor& b) {
    if (a.defined() != b.defined()) return 1e9;
    if (!a.defined() || a.numel() == 0) return 0;
    if (a.sizes() != b.sizes()) return 1e9;
    return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

/// Collective calls this rank recorded after sequence `after` at `site`.
std::vector<mpify::CollectiveCall> calls_since(std::uint64_t after, const std::string& site) {
    std::vector<mpify::CollectiveCall> out;
    for (const auto& call : mpify::ddp::recorded_calls())
        if (call.sequence > after && call.site == site) out.push_back(call);
    return out;
}

std::uint64_t last_sequence() {
    const auto calls = mpify::ddp::recorded_calls();
    return calls.empty() ? 0 : calls.back().sequence;
}

class Comparison {
public:
    void note(const std::string& what, double difference) {
        if (difference > report.largest_difference) {
            report.largest_difference = difference;
            report.worst = what;
        }
    }
    SyncNormReport report;
};

/// Trains `reference` on the whole batch and `sync` on this rank's part, side by side.
template <class Reference, class Synced>
SyncNormReport compare(Reference& reference, Synced& sync, const SyncNormCase& c) {
    const int rank = mpify::ddp::rank();
    if (c.batch_sizes.size() != static_cast<std::size_t>(mpify::ddp::world_size()))
        throw std::invalid_argument("one batch size per rank, please");
    const std::int64_t total = std::accumulate(c.batch_sizes.begin(), c.batch_sizes.end(), std::int64_t{0});
    const std::int64_t offset = std::accumulate(c.batch_sizes.begin(), c.batch_sizes.begin() + rank, std::int64_t{0});
    const std::int64_t mine = c.batch_sizes[static_cast<std::size_t>(rank)];
    const bool flat = c.converted;  // the converted 1d model takes (N, C)

    Comparison result;
    for (auto& m : sync->modules(false))
        if (std::dynamic_pointer_cast<mpify::SyncBatchNorm1dImpl>(m) ||
            std::dynamic_pointer_cast<mpify::SyncBatchNorm2dImpl>(m) ||
            std::dynamic_pointer_cast<mpify::SyncBatchNorm3dImpl>(m))
            ++result.report.norms;

    torch::optim::SGD reference_sgd(reference->parameters(), 0.1);
    torch::optim::SGD sync_sgd(sync->parameters(), 0.1);
    torch::manual_seed(11 + c.dims);
    for (int step = 0; step < 2; ++step) {
        const std::string name = "step " + std::to_string(step) + " ";
        const at::Tensor x_all = torch::randn(batch_shape(c.dims, total, flat)) * 2 + 0.5;
        const at::Tensor weights_all = torch::randn(x_all.sizes());
        const at::Tensor x_ref = x_all.clone().requires_grad_();
        const at::Tensor y_ref = reference->forward(x_ref);
        (y_ref * weights_all).sum().backward();

        const at::Tensor x_mine = x_all.narrow(0, offset, mine).clone().requires_grad_();
        const std::uint64_t before = last_sequence();
        const at::Tensor y = sync->forward(x_mine);
        const std::uint64_t after_forward = last_sequence();
        (y * weights_all.narrow(0, offset, mine)).sum().backward();
        if (step == 0) {
            const auto forward = calls_since(before, "mpify::SyncBatchNorm forward");
            result.report.forward_calls = static_cast<std::int64_t>(forward.size());
            if (!forward.empty()) result.report.forward_call_bytes = static_cast<std::int64_t>(forward[0].bytes);
            result.report.backward_calls =
                static_cast<std::int64_t>(calls_since(after_forward, "mpify::SyncBatchNorm backward").size());
        }
        result.note(name + "output", largest(y, y_ref.narrow(0, offset, mine)));
        result.note(name + "input gradient", largest(x_mine.grad(), x_ref.grad().narrow(0, offset, mine)));

        const auto reference_parameters = reference->named_parameters();
        for (auto& p : sync->named_parameters()) {
            at::Tensor summed = p.value().grad().clone();
            mpify::ddp::all_reduce(summed);
            result.note(name + p.key() + " gradient", largest(summed, reference_parameters[p.key()].grad()));
            p.value().mutable_grad() = summed;
        }
        reference_sgd.step();
        sync_sgd.step();
        reference_sgd.zero_grad();
        sync_sgd.zero_grad();
    }
    const auto reference_buffers = reference->named_buffers();
    for (auto& b : sync->named_buffers()) result.note(b.key(), largest(b.value(), reference_buffers[b.key()]));

    reference->eval();
    sync->eval();
    const at::Tensor x_all = torch::randn(batch_shape(c.dims, total, flat));
    const std::uint64_t before_eval = last_sequence();
    const at::Tensor y = sync->forward(x_all.narrow(0, offset, mine));
    result.report.eval_calls = static_cast<std::int64_t>(last_sequence() - before_eval);
    result.note("eval output", largest(y, reference->forward(x_all).narrow(0, offset, mine)));

    // The largest difference over ranks, and the same verdict everywhere.
    at::Tensor largest_anywhere = torch::tensor(result.report.largest_difference, torch::kDouble);
    mpify::ddp::all_reduce(largest_anywhere, c10d::ReduceOp::MAX);
    if (largest_anywhere.item<double>() > result.report.largest_difference) result.report.worst = "on another rank";
    result.report.largest_difference = largest_anywhere.item<double>();
    return result.report;
}

template <int D>
SyncNormReport compare_members(const SyncNormCase& c) {
    torch::manual_seed(5);
    auto reference = std::make_shared<NormPair<typename Norms<D>::Plain>>();
    randomize_affine(*reference);
    // A BatchNorm model's saved weights load into the SyncBatchNorm model: same names.
    std::stringstream saved;
    torch::save(reference, saved);
    auto sync = std::make_shared<NormPair<typename Norms<D>::Sync>>();
    torch::load(sync, saved);
    return compare(reference, sync, c);
}

template <int D>
SyncNormReport compare_converted(const SyncNormCase& c) {
    using Plain = typename Norms<D>::Plain;
    torch::manual_seed(6);
    torch::nn::Sequential reference(
        Plain(channels), torch::nn::Functional(torch::tanh),
        mpify::SequentialBlock(Plain(torch::nn::BatchNormOptions(channels).affine(false).momentum(c10::nullopt)),
                               torch::nn::Functional(torch::sigmoid)),
        Plain(torch::nn::BatchNormOptions(channels).momentum(0.3)));
    randomize_affine(*reference);
    torch::nn::Sequential sync = mpify::convert_sync_batchnorm(reference);
    return compare(reference, sync, c);
}

}  // namespace

std::vector<SyncNormReport> compare_sync_batch_norm(std::vector<SyncNormCase> cases) {
    std::vector<SyncNormReport> reports;
    for (const SyncNormCase& c : cases) {
        if (c.dims == 1) reports.push_back(c.converted ? compare_converted<1>(c) : compare_members<1>(c));
        else if (c.dims == 2) reports.push_back(c.converted ? compare_converted<2>(c) : compare_members<2>(c));
        else reports.push_back(c.converted ? compare_converted<3>(c) : compare_members<3>(c));
    }
    return reports;
}
MPIFY_REGISTER(compare_sync_batch_norm);

std::vector<at::Tensor> train_with_sync_batch_norm(int steps, bool in_group) {
    torch::manual_seed(21);
    torch::nn::Sequential plain(torch::nn::Linear(4, 6), torch::nn::BatchNorm1d(6), torch::nn::Functional(torch::relu),
                                torch::nn::Linear(6, 1));
    const at::Tensor x = torch::randn({12, 4});
    const at::Tensor y = torch::randn({12, 1});
    auto state = [](const torch::nn::Sequential& model) {
        std::vector<at::Tensor> out;
        for (const at::Tensor& p : model->parameters()) out.push_back(p.detach().clone());
        for (const at::Tensor& b : model->buffers()) out.push_back(b.clone());
        return out;
    };
    if (!in_group) {
        torch::optim::SGD sgd(plain->parameters(), 0.1);
        for (int step = 0; step < steps; ++step) {
            sgd.zero_grad();
            torch::mse_loss(plain->forward(x), y).backward();
            sgd.step();
        }
        return state(plain);
    }
    const std::int64_t share = 12 / mpify::ddp::world_size();
    const std::int64_t offset = share * mpify::ddp::rank();
    mpify::DdpModelOptions options;
    options.bucket_bytes = 64;  // several buckets, sent while backward (and SyncBatchNorm's) runs
    mpify::DistributedDataParallel model(mpify::convert_sync_batchnorm(plain).ptr(), options);
    torch::optim::SGD sgd(model.parameters(), 0.1);
    for (int step = 0; step < steps; ++step) {
        sgd.zero_grad();
        torch::mse_loss(model(x.narrow(0, offset, share)), y.narrow(0, offset, share)).backward();
        sgd.step();
    }
    return state(torch::nn::Sequential(model.module()));
}
MPIFY_REGISTER(train_with_sync_batch_norm);

int sync_batch_norm_misfed(std::string how) {
    mpify::SyncBatchNorm1d norm(3);
    const int rank = mpify::ddp::rank();
    if (how == "one value") norm(torch::randn({rank == 0 ? 1 : 0, 3}));
    else if (how == "channels") norm(torch::randn({4, rank == 1 ? 4 : 3}));
    return 0;
}
MPIFY_REGISTER(sync_batch_norm_misfed);

std::string sync_batch_norm_alone() {
    torch::manual_seed(3);
    torch::nn::BatchNorm2d plain(torch::nn::BatchNormOptions(4).momentum(0.2));
    mpify::SyncBatchNorm2d sync(torch::nn::BatchNormOptions(4).momentum(0.2));
    double difference = 0;
    for (int step = 0; step < 2; ++step) {
        const at::Tensor x = torch::randn({5, 4, 3, 3});
        const at::Tensor x_plain = x.clone().requires_grad_();
        const at::Tensor x_sync = x.clone().requires_grad_();
        const at::Tensor y_plain = plain(x_plain);
        const at::Tensor y_sync = sync(x_sync);
        (y_plain * y_plain).sum().backward();
        (y_sync * y_sync).sum().backward();
        difference = std::max({difference, largest(y_plain, y_sync), largest(x_plain.grad(), x_sync.grad()),
                               largest(plain->weight.grad(), sync->weight.grad())});
    }
    difference = std::max({difference, largest(plain->running_mean, sync->running_mean),
                           largest(plain->running_var, sync->running_var)});
    plain->eval();
    sync->eval();
    const at::Tensor x = torch::randn({2, 4, 3, 3});
    difference = std::max(difference, largest(plain(x), sync(x)));
    std::ostringstream printed;
    printed << difference << " | " << *plain << " | " << *sync;
    return printed.str();
}

}  // namespace ddp_test
