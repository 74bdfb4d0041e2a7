// From the launch call to every rank's first optimizer step, mpify's side of
// launch_bench.py: in a process that has already used LibTorch (as a notebook's kernel
// has), `in_ddp(n, first_step)` RUNS times; each rank builds the intro CNN, wraps it in
// DistributedDataParallel and takes one SGD step on a batch of 64; the call's latency is
// from just before `in_ddp` to the last rank's end of that step, on the one monotonic
// clock all processes share. Prints one line per call, in seconds: the first call of the
// process (which also starts the warm template) and then the later ones.
//
//   ./build/bin/mpify_launch_bench N RUNS [gloo]
#include "timing.hpp"

#include <intro/cnn.hpp>
#include <mpify/torch.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

using mpify_bench::steady_nanoseconds;

// One rank's first training step; returns when the last rank's ended, on the steady clock
// (taken before the all-reduce that finds the last).
std::int64_t first_step() {
    torch::set_num_threads(1);
    torch::manual_seed(0);
    const at::Tensor images = torch::randn({64, 1, 28, 28});
    const at::Tensor labels = torch::randint(0, 10, {64});
    auto model = std::make_shared<mpify_examples::intro::Cnn>();
    mpify::DistributedDataParallel ddp_model(model);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    optimizer.zero_grad();
    torch::cross_entropy_loss(ddp_model(images), labels).backward();
    optimizer.step();
    at::Tensor ended = torch::tensor({steady_nanoseconds()}, torch::kInt64);
    mpify::ddp::all_reduce(ended, c10d::ReduceOp::MAX);
    return ended.item<std::int64_t>();
}
MPIFY_REGISTER(first_step);

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s N RUNS [gloo]\n", argv[0]);
        return 2;
    }
    const int n = std::max(1, std::atoi(argv[1])), runs = std::max(1, std::atoi(argv[2]));
    mpify::DdpOptions ddp;
    if (argc > 3 && std::string(argv[3]) == "gloo") ddp.backend = mpify::Backend::gloo;
    mpify::Options quiet;
    quiet.relay = mpify::Relay::discard;
    // The kernel has used LibTorch before the cell that launches: its libraries are loaded
    // and its thread pools started.
    (void)(torch::ones({8, 8}).matmul(torch::ones({8, 8}))).sum().item<float>();
    for (int run = 0; run < runs; ++run) {
        const std::int64_t start = steady_nanoseconds();
        const std::int64_t last_step_ended = mpify::in_ddp(ddp, quiet, n, first_step);
        std::printf("%.4f\n", static_cast<double>(last_step_ended - start) / 1e9);
        std::fflush(stdout);
    }
    return 0;
}
