// One machine's part of the several-machines benchmark (run by machines_bench.py):
// all-reduce bandwidth of 1, 16 and 64 MiB in a group of 4, and how long in_ddp takes
// to form that group (spawning included), median of 5 calls each; or the seconds of a
// DDP training step with and without the fp16 compression hook.
//   mpify_bench_machines across N   this machine's place from the launcher's variables
//   mpify_bench_machines one N      all N ranks on this machine
//   mpify_bench_machines hooks N    as across, training steps instead
// Prints "allreduce <MiB> MiB: <GB/s> GB/s" and "group formed: <s> s", or
// "step float32: <s> s" and "step fp16 hook: <s> s".
#include <mpify/ddp.hpp>
#include <mpify/ddp_guard.hpp>
#include <mpify/distributed_data_parallel.hpp>
#include <mpify/mpify.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

// Rank 0's median seconds per all-reduce of `mib` MiB of floats, after one untimed.
std::vector<double> allreduce_seconds(std::vector<int> mibs) {
    std::vector<double> result;
    for (int mib : mibs) {
        at::Tensor t = at::ones({static_cast<std::int64_t>(mib) << 18});  // 4-byte floats
        mpify::ddp::all_reduce(t);
        std::vector<double> times;
        for (int i = 0; i < 5; ++i) {
            mpify::ddp::barrier();
            const auto start = Clock::now();
            mpify::ddp::all_reduce(t);
            times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
        }
        result.push_back(median(times));
    }
    return result;
}
MPIFY_REGISTER(allreduce_seconds);

int formed() { return mpify::ddp::world_size(); }
MPIFY_REGISTER(formed);

// Rank 0's median seconds per training step of a 4.2-million-parameter perceptron (17 MB
// of float32 gradients a step), batch 32 a rank, after 2 untimed steps; hook: "" or "fp16".
double step_seconds(std::string hook) {
    torch::manual_seed(0);
    auto model = torch::nn::Sequential(torch::nn::Linear(1024, 2048), torch::nn::ReLU(), torch::nn::Linear(2048, 1024),
                                       torch::nn::ReLU(), torch::nn::Linear(1024, 10));
    mpify::DdpModelOptions options;
    if (hook == "fp16") options.communication_hook = mpify::fp16_compress_hook();
    mpify::DistributedDataParallel ddp_model(model.ptr(), options);  // Sequential: its impl
    torch::optim::SGD optimizer(model->parameters(), 0.01);
    const at::Tensor x = torch::randn({32, 1024}), y = torch::randint(10, {32});
    std::vector<double> times;
    for (int step = 0; step < 12; ++step) {
        mpify::ddp::barrier();
        const auto start = Clock::now();
        optimizer.zero_grad();
        torch::cross_entropy_loss(ddp_model(x), y).backward();
        optimizer.step();
        if (step >= 2) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    return median(times);
}
MPIFY_REGISTER(step_seconds);

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const std::string mode = argc == 3 ? argv[1] : "";
    if (mode != "across" && mode != "one" && mode != "hooks") {
        std::fprintf(stderr, "usage: mpify_bench_machines across|one|hooks N\n");
        return 2;
    }
    const int n = std::atoi(argv[2]);
    mpify::DdpOptions options;
    if (mode != "one") options = mpify::DdpOptions::from_environment();
    // Gloo on both sides: the comparison is of its transport through a veth pair against
    // loopback (one machine's default, the shared-memory group, is mpify_ddp_bench's).
    options.backend = mpify::Backend::gloo;
    if (mode == "hooks") {
        const double plain = mpify::in_ddp(options, n, step_seconds, std::string());
        const double fp16 = mpify::in_ddp(options, n, step_seconds, std::string("fp16"));
        if (options.node_rank == 0) std::printf("step float32: %.4f s\nstep fp16 hook: %.4f s\n", plain, fp16);
        return 0;
    }
    const std::vector<int> mibs{1, 16, 64};
    const std::vector<double> seconds = mpify::in_ddp(options, n, allreduce_seconds, mibs);
    std::vector<double> forming;
    for (int i = 0; i < 5; ++i) {
        const auto start = Clock::now();
        mpify::in_ddp(options, n, formed);
        forming.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    if (options.node_rank != 0) return 0;
    for (std::size_t i = 0; i < mibs.size(); ++i)
        std::printf("allreduce %d MiB: %.3f GB/s\n", mibs[i], (mibs[i] << 20) / seconds[i] / 1e9);
    std::printf("group formed: %.3f s\n", median(forming));
}
