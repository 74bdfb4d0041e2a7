// The tests that need an NVIDIA GPU (ctest label `gpu`; scripts/gpu-check.sh runs them on a
// machine that has one). Each ctest test runs one case; without a GPU, the program says
// "skipped: no GPU" and exits 77, which ctest reports as a skip. Every case asserts values:
// one GPU is enough (two ranks share it where a case needs two).
#include "catch_session.hpp"

#include <mpify/grad_scaler.hpp>
#include <mpify/torch.hpp>

#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Mlp : torch::nn::Module {
    Mlp() {
        first = register_module("first", torch::nn::Linear(6, 16));
        second = register_module("second", torch::nn::Linear(16, 1));
    }
    at::Tensor forward(const at::Tensor& x) { return second(torch::tanh(first(x))); }
    torch::nn::Linear first{nullptr}, second{nullptr};
};

// 64 samples, the same on every rank (the seed), on `device`.
std::pair<at::Tensor, at::Tensor> regression_data(c10::Device device) {
    torch::manual_seed(4321);
    const at::Tensor x = torch::randn({64, 6});
    const at::Tensor y = torch::randn({64, 1});
    return {x.to(device), y.to(device)};
}

std::vector<at::Tensor> on_cpu(const std::vector<at::Tensor>& tensors) {
    std::vector<at::Tensor> copies;
    for (const auto& t : tensors) copies.push_back(t.detach().to(at::kCPU));
    return copies;
}

double largest_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    double largest = 0;
    for (std::size_t i = 0; i < a.size(); ++i) largest = std::max(largest, (a[i] - b[i]).abs().max().item<double>());
    return largest;
}

// Trains the Mlp for `steps` SGD steps on this rank's shard of the data (the whole data
// alone), on the rank's device; the parameters, on the CPU.
std::vector<at::Tensor> train(int steps) {
    const bool grouped = mpify::ddp::active();
    const c10::Device device = grouped ? mpify::ddp::device() : c10::Device(c10::DeviceType::CUDA, 0);
    torch::manual_seed(1);
    auto model = std::make_shared<Mlp>();
    model->to(device);
    auto [x, y] = regression_data(device);
    if (grouped) {
        const int64_t shard = x.size(0) / mpify::ddp::world_size();
        x = x.narrow(0, mpify::ddp::rank() * shard, shard);
        y = y.narrow(0, mpify::ddp::rank() * shard, shard);
    }
    std::optional<mpify::DistributedDataParallel<Mlp>> ddp;
    if (grouped) ddp.emplace(model);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
    for (int step = 0; step < steps; ++step) {
        optimizer.zero_grad();
        const at::Tensor out = grouped ? (*ddp)(x) : model->forward(x);
        torch::mse_loss(out, y).backward();
        optimizer.step();
    }
    torch::cuda::synchronize();
    return on_cpu(model->parameters());
}

}  // namespace

// {device index, sum of an all-reduce of 3s on the device, the group's backend is NCCL}
std::vector<double> nccl_one_rank() {
    const c10::Device device = mpify::ddp::device();
    at::Tensor t = at::full({4}, 3.0, at::TensorOptions().device(device));
    mpify::ddp::all_reduce(t);
    at::Tensor on_cpu_side = at::ones({1});  // a CPU tensor goes to the group's Gloo part
    mpify::ddp::all_reduce(on_cpu_side);
    return {static_cast<double>(device.is_cuda() ? device.index() : -1), t.sum().item<double>(),
            mpify::ddp::process_group()->getBackendName() == "nccl" ? 1.0 : 0.0, on_cpu_side.item<double>()};
}
MPIFY_REGISTER(nccl_one_rank);

// {device index, the all-reduced sum of rank + 1, broadcast of rank 0's 7}
std::vector<double> shared_gpu_collectives() {
    const c10::Device device = mpify::ddp::device();
    at::Tensor t = at::full({8}, mpify::ddp::rank() + 1.0, at::TensorOptions().device(device));
    mpify::ddp::all_reduce(t);
    at::Tensor b = at::full({2}, mpify::ddp::rank() == 0 ? 7.0 : 0.0, at::TensorOptions().device(device));
    mpify::ddp::broadcast(b);
    return {static_cast<double>(device.is_cuda() ? device.index() : -1), t[0].item<double>(), b[1].item<double>()};
}
MPIFY_REGISTER(shared_gpu_collectives);

std::vector<at::Tensor> train_in_group(int steps) { return train(steps); }
MPIFY_REGISTER(train_in_group);

// The largest difference between SyncBatchNorm2d on this rank's half of a batch, on the
// GPU, and BatchNorm2d on the whole batch in this process: outputs, running statistics,
// the input's gradient and (summed over the ranks) the weight's and bias's.
double sync_batch_norm_difference() {
    const c10::Device device = mpify::ddp::device();
    torch::manual_seed(7);
    const at::Tensor whole = torch::randn({8, 3, 5, 5}).to(device);
    const at::Tensor upstream = torch::randn({8, 3, 5, 5}).to(device);  // d loss / d output
    torch::nn::BatchNorm2d reference(3);
    mpify::SyncBatchNorm2d synced(3);
    reference->to(device);
    synced->to(device);
    const at::Tensor whole_input = whole.clone().requires_grad_();
    const at::Tensor expected = reference->forward(whole_input);
    (expected * upstream).sum().backward();
    const int64_t first = mpify::ddp::rank() * 4;
    const at::Tensor mine = whole.narrow(0, first, 4).clone().requires_grad_();
    const at::Tensor got = synced->forward(mine);
    (got * upstream.narrow(0, first, 4)).sum().backward();
    at::Tensor weight_grad = synced->weight.grad().clone(), bias_grad = synced->bias.grad().clone();
    mpify::ddp::all_reduce(weight_grad);
    mpify::ddp::all_reduce(bias_grad);
    const auto largest = [](const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); };
    return std::max({largest(got, expected.narrow(0, first, 4)), largest(synced->running_mean, reference->running_mean),
                     largest(synced->running_var, reference->running_var),
                     largest(mine.grad(), whole_input.grad().narrow(0, first, 4)),
                     largest(weight_grad, reference->weight.grad()), largest(bias_grad, reference->bias.grad())});
}
MPIFY_REGISTER(sync_batch_norm_difference);

// Where a CUDA tensor argument arrived ("cuda:0"), with its sum; and twice it, on that device.
std::pair<std::string, double> where_and_sum(at::Tensor t) { return {t.device().str(), t.sum().item<double>()}; }
MPIFY_REGISTER(where_and_sum);
at::Tensor doubled(at::Tensor t) { return t * 2; }
MPIFY_REGISTER(doubled);

TEST_CASE("NCCL with one rank binds GPU 0 and all-reduces CUDA and CPU tensors", "[gpu]") {
    mpify::DdpOptions options;
    options.backend = mpify::Backend::nccl;
    const auto r = mpify::in_ddp(options, 1, nccl_one_rank);
    CHECK(r[0] == 0);
    CHECK(r[1] == 12.0);
    CHECK(r[2] == 1.0);
    CHECK(r[3] == 1.0);
}

TEST_CASE("two ranks share one GPU over Gloo and all-reduce and broadcast on it", "[gpu]") {
    mpify::DdpOptions options;
    options.backend = mpify::Backend::gloo;
    options.gpus = {0, 0};
    const auto r = mpify::in_ddp(options, 2, shared_gpu_collectives);
    CHECK(r[0] == 0);
    CHECK(r[1] == 3.0);
    CHECK(r[2] == 7.0);
}

TEST_CASE("DDP on CUDA parameters trains to the parameters of one process on the whole batch", "[gpu]") {
    const auto alone = train(10);
    mpify::DdpOptions nccl;
    nccl.backend = mpify::Backend::nccl;
    CHECK(largest_difference(mpify::in_ddp(nccl, 1, train_in_group, 10), alone) < 1e-5);
    mpify::DdpOptions shared;
    shared.backend = mpify::Backend::gloo;
    shared.gpus = {0, 0};
    CHECK(largest_difference(mpify::in_ddp(shared, 2, train_in_group, 10), alone) < 1e-5);
}

TEST_CASE("SyncBatchNorm on CUDA equals BatchNorm on the whole batch", "[gpu]") {
    mpify::DdpOptions options;
    options.backend = mpify::Backend::gloo;
    options.gpus = {0, 0};
    CHECK(mpify::in_ddp(options, 2, sync_batch_norm_difference) < 1e-5);
}

TEST_CASE("a CUDA tensor argument arrives on the rank's GPU, and a CUDA result on the caller's", "[gpu]") {
    const at::Tensor t = at::arange(10, at::TensorOptions().device(at::kCUDA).dtype(at::kFloat));
    mpify::Options options;
    options.caller_rank = std::nullopt;  // both ranks are workers: the tensor crosses the channel
    const auto arrived = mpify::ranch(options, 2, where_and_sum, t);
    const int gpus = static_cast<int>(torch::cuda::device_count());
    for (int rank = 0; rank < 2; ++rank) {
        CHECK(arrived[rank].first == "cuda:" + std::to_string(rank % gpus));  // local rank mod the GPUs
        CHECK(arrived[rank].second == 45.0);
    }
    const auto results = mpify::ranch(options, 2, doubled, t);
    for (const at::Tensor& result : results) {
        CHECK(result.is_cuda());
        CHECK(result.device().index() == 0);  // the caller's current device
        CHECK(result.sum().item<double>() == 90.0);
    }
}

TEST_CASE("float16 training with the GradScaler follows float32 and skips a poisoned step", "[gpu]") {
    const c10::Device device(c10::DeviceType::CUDA, 0);
    // Trains 40 steps with the forward in float16 (`half`) or float32; a gradient of
    // `poisoned_step` is made inf. The last loss, the parameters and the skipped steps.
    struct Run {
        double loss = 0;
        std::vector<at::Tensor> parameters;
        int skipped = 0;
    };
    auto run = [&](bool half, int poisoned_step) {
        Run r;
        torch::manual_seed(1);
        auto model = std::make_shared<Mlp>();
        model->to(device);
        auto [x, y] = regression_data(device);
        torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
        mpify::GradScaler scaler({/*init_scale=*/1024.0, 2.0, 0.5, 2000, /*enabled=*/half});
        for (int step = 0; step < 40; ++step) {
            optimizer.zero_grad();
            at::autocast::set_autocast_enabled(at::kCUDA, half);
            at::autocast::set_autocast_dtype(at::kCUDA, at::kHalf);
            at::Tensor loss = torch::mse_loss(model->forward(x).to(at::kFloat), y);
            at::autocast::set_autocast_enabled(at::kCUDA, false);
            at::autocast::clear_cache();
            scaler.scale(loss).backward();
            if (step == poisoned_step) {
                torch::NoGradGuard no_grad;
                model->first->weight.mutable_grad()[0][0] = std::numeric_limits<float>::infinity();
            }
            if (!scaler.step(optimizer)) ++r.skipped;
            scaler.update();
            r.loss = loss.item<double>();
        }
        r.parameters = on_cpu(model->parameters());
        return r;
    };
    const Run full = run(false, -1);
    const Run half = run(true, -1);
    CHECK(half.skipped == 0);
    CHECK(half.loss == Approx(full.loss).epsilon(0.02));
    CHECK(largest_difference(half.parameters, full.parameters) < 0.01);
    const Run poisoned = run(true, 5);
    CHECK(poisoned.skipped == 1);
    for (const auto& p : poisoned.parameters) CHECK(at::isfinite(p).all().item<bool>());
}

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    bool listing = false;  // ctest's discovery lists the cases on any machine
    for (int i = 1; i < argc; ++i) listing = listing || std::string(argv[i]).rfind("--list", 0) == 0;
    if (!listing && torch::cuda::device_count() == 0) {
        std::cout << "skipped: no GPU\n";
        return 77;
    }
    return run_catch_session(argc, argv);
}
