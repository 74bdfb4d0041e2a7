// The caller's own rank against a worker, on the same plain training function (no group):
// samples per second and minor page faults per step, interleaved in one run.
//
//   cmake --build build --target mpify_caller_rank_bench
//   ./build/bin/mpify_caller_rank_bench [steps] [batch]
//
// Rows: the function called directly in this process; as the caller's rank of ranch(1),
// in this process and as the first thing a fresh process does;
// in a worker of ranch (no caller rank), as mpify starts it; in a worker without the
// malloc setting mpify gives its workers (GLIBC_TUNABLES empty); and the caller's rank
// and a worker with a mpify::TensorMemoryCache around the training (as DdpGuard holds).
#include <data/fashion_mnist.hpp>
#include <intro/cnn.hpp>
#include <mpify/mpify.hpp>
#include <mpify/tensor_memory.hpp>

#include <torch/torch.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace {

using Clock = std::chrono::steady_clock;

long minor_faults_of_this_thread() {
    rusage usage{};
    ::getrusage(RUSAGE_THREAD, &usage);
    return usage.ru_minflt;
}

// Trains the intro CNN for `steps` batches after 5 untimed ones, on one thread; returns
// samples per second and minor page faults per timed step. With `cache`, inside a
// mpify::TensorMemoryCache.
std::pair<double, double> plain_training(int steps, int batch, bool cache) {
    std::optional<mpify::TensorMemoryCache> keep;
    if (cache) keep.emplace();
    const int warmup = 5;
    torch::set_num_threads(1);
    const auto data = mpify_examples::load_fashion_mnist(true, static_cast<std::int64_t>(batch) * (steps + warmup));
    torch::manual_seed(0);
    auto model = std::make_shared<mpify_examples::intro::Cnn>();
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    auto start = Clock::now();
    long faults_at_start = 0;
    for (int step = 0; step < warmup + steps; ++step) {
        if (step == warmup) {
            start = Clock::now();
            faults_at_start = minor_faults_of_this_thread();
        }
        const at::Tensor x = data.images.narrow(0, step * batch, batch), y = data.labels.narrow(0, step * batch, batch);
        optimizer.zero_grad();
        torch::cross_entropy_loss(model->forward(x), y).backward();
        optimizer.step();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return {static_cast<double>(batch) * steps / seconds,
            static_cast<double>(minor_faults_of_this_thread() - faults_at_start) / steps};
}
MPIFY_REGISTER(plain_training);

void keep_best(std::pair<double, double>& best, const std::pair<double, double>& run) {
    if (run.first > best.first) best = run;
}

// The caller's rank in a process that has done nothing else yet (as a notebook's kernel
// that just started): this program again, with --fresh-caller-rank, printing its figures.
std::pair<double, double> fresh_caller_rank(int steps, int batch) {
    const std::string command = "/proc/" + std::to_string(::getpid()) + "/exe --fresh-caller-rank " +
                                std::to_string(steps) + " " + std::to_string(batch);
    std::pair<double, double> figures{};
    if (FILE* pipe = ::popen(command.c_str(), "r")) {
        if (std::fscanf(pipe, "%lf %lf", &figures.first, &figures.second) != 2) figures = {};
        ::pclose(pipe);
    }
    return figures;
}

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const bool fresh_child = argc > 1 && std::string(argv[1]) == "--fresh-caller-rank";
    if (fresh_child) {
        --argc;
        ++argv;
    }
    const int steps = argc > 1 ? std::max(5, std::atoi(argv[1])) : 30;
    const int batch = argc > 2 ? std::max(1, std::atoi(argv[2])) : 128;
    mpify::Options caller;
    caller.relay = mpify::Relay::discard;
    if (fresh_child) {
        const auto figures = mpify::ranch(caller, 1, plain_training, steps, batch, false).front();
        std::printf("%f %f\n", figures.first, figures.second);
        return 0;
    }
    mpify::Options worker = caller;
    worker.caller_rank = std::nullopt;
    mpify::Options plain_worker = worker;
    plain_worker.env["GLIBC_TUNABLES"] = "";

    std::pair<double, double> direct{}, caller_rank{}, fresh_caller{}, in_worker{}, in_plain_worker{},
        cached_caller_rank{}, cached_worker{};
    for (int run = 0; run < 3; ++run) {  // interleaved, best of 3
        keep_best(fresh_caller, fresh_caller_rank(steps, batch));
        keep_best(direct, plain_training(steps, batch, false));
        keep_best(caller_rank, mpify::ranch(caller, 1, plain_training, steps, batch, false).front());
        keep_best(in_worker, mpify::ranch(worker, 1, plain_training, steps, batch, false).front());
        keep_best(in_plain_worker, mpify::ranch(plain_worker, 1, plain_training, steps, batch, false).front());
        keep_best(cached_caller_rank, mpify::ranch(caller, 1, plain_training, steps, batch, true).front());
        keep_best(cached_worker, mpify::ranch(worker, 1, plain_training, steps, batch, true).front());
    }
    std::printf("intro CNN, batch %d, %d timed steps, one thread, best of 3\n", batch, steps);
    std::printf("%-40s %10s %14s %10s\n", "", "samples/s", "faults/step", "vs worker");
    for (const auto& [name, figures] :
         {std::pair{"called directly in this process", direct}, std::pair{"the caller's rank of ranch(1)", caller_rank},
          std::pair{"the same, first thing in a fresh process", fresh_caller}, std::pair{"a worker", in_worker},
          std::pair{"a worker, GLIBC_TUNABLES empty", in_plain_worker},
          std::pair{"the caller's rank, TensorMemoryCache", cached_caller_rank},
          std::pair{"a worker, TensorMemoryCache", cached_worker}})
        std::printf("%-40s %10.0f %14.0f %10.2f\n", name, figures.first, figures.second,
                    figures.first / in_worker.first);
    return 0;
}
