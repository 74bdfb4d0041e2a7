// What surviving a lost rank costs: the Learner's checkpoint of the intro CNN against an
// epoch of its training, and the time from a rank's death to the restarted call running.
//
//   cmake --build build --target mpify_restart_bench
//   ./build/bin/mpify_restart_bench [batches] [repetitions]
//
// Checkpoint: one process trains the intro CNN for `batches` batches of 128 (the time of
// a whole epoch is that per batch times the epoch's 469 batches), then Learner::save
// writes its checkpoint `repetitions` times; the median write against the epoch.
// Restart: in_ddp(2) with Options::restarts = 1, rank 1 SIGKILLs itself after one
// all-reduce and writes the moment first; the restarted attempt's rank 0 notes when its
// function starts (its group formed): the median of that gap over `repetitions` calls.
// It holds everything between: the death noticed, rank 0's broken collective, the
// stop and reaping, the line on stderr, fresh processes and a fresh group. Loading a
// checkpoint comes on top (its size is printed).
#include "timing.hpp"

#include <data/fashion_mnist.hpp>
#include <intro/cnn.hpp>
#include <mpify/learner/learner.hpp>

#include <mpify/ddp.hpp>
#include <mpify/ddp_guard.hpp>
#include <mpify/mpify.hpp>

#include <torch/torch.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace mpify::learner;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double now_seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// The steady clock is the machine's: both ranks' readings compare.
double seconds_from_death_to_restart(std::string death_file) {
    if (mpify::restart_count() == 0) {
        at::Tensor t = torch::ones({1});
        mpify::ddp::all_reduce(t);
        if (mpify::ddp::rank() == 1) {
            std::ofstream(death_file) << std::to_string(now_seconds()) << std::endl;
            ::raise(SIGKILL);
        }
        mpify::ddp::all_reduce(t);  // breaks: the peer is gone
        return -1;
    }
    const double restarted = now_seconds();
    double died = 0;
    std::ifstream(death_file) >> died;
    return restarted - died;
}
MPIFY_REGISTER(seconds_from_death_to_restart);

// When an epoch's training batches began and when the last one ended (validation apart).
class TrainingTime : public mpify::learner::Callback {
public:
    void before_epoch(const mpify::learner::Learner&, int, std::int64_t) override { begin = Clock::now(); }
    void after_batch(const mpify::learner::Learner&, std::int64_t, double) override { end = Clock::now(); }
    Clock::time_point begin, end;
};

void checkpoint_cost(int batches, int repetitions) {
    using namespace mpify_examples;
    torch::set_num_threads(1);
    torch::manual_seed(0);
    const ImageSet train = load_fashion_mnist(true);
    const ImageSet test = load_fashion_mnist(false);
    LearnerOptions options;
    options.max_batches = batches;
    Learner learn(
        {{train.images, train.labels}, {test.images, test.labels}, 128, 0}, std::make_shared<intro::Cnn>(),
        [](const at::Tensor& out, const at::Tensor& y) { return torch::cross_entropy_loss(out, y); }, {}, options);
    auto timing = std::make_shared<TrainingTime>();
    learn.add_callback(timing);
    learn.fit(1, 1e-3);
    const double per_batch = std::chrono::duration<double>(timing->end - timing->begin).count() / batches;
    const double epoch = per_batch * static_cast<double>((train.images.size(0) + 127) / 128);
    const fs::path file = fs::temp_directory_path() / ("mpify_restart_bench_" + std::to_string(::getpid()) + ".pt");
    const mpify_bench::Timing save = mpify_bench::measure(repetitions, [&] { learn.save(file.string()); });
    std::printf("checkpoint of the intro CNN: %.1f KiB, written in %.1f ms (median of %d; best %.1f ms)\n",
                static_cast<double>(fs::file_size(file)) / 1024, save.median * 1e3, repetitions, save.best * 1e3);
    std::printf("an epoch of 469 batches of 128 on one process: %.1f s (%.1f ms a batch over %d)\n", epoch,
                per_batch * 1e3, batches);
    std::printf("checkpoint / epoch: %.4f (%.2f %%); on 2 ranks (half the epoch): %.2f %%\n", save.median / epoch,
                100 * save.median / epoch, 200 * save.median / epoch);
    fs::remove(file);
}

void restart_latency(int repetitions) {
    const fs::path death = fs::temp_directory_path() / ("mpify_restart_bench_death_" + std::to_string(::getpid()));
    mpify::Options options;
    options.restarts = 1;
    options.relay = mpify::Relay::discard;
    std::vector<double> gaps;
    std::ostringstream notices;  // the restart lines, not this benchmark's output
    std::streambuf* old_err = std::cerr.rdbuf(notices.rdbuf());
    for (int i = 0; i < repetitions + 1; ++i) {  // the first starts the warm template
        const double gap =
            mpify::in_ddp(mpify::DdpOptions{}, options, 2, seconds_from_death_to_restart, death.string());
        if (i > 0) gaps.push_back(gap);
    }
    std::cerr.rdbuf(old_err);
    fs::remove(death);
    const mpify_bench::Timing t = mpify_bench::summary(gaps);
    std::printf("a rank killed -> the restarted in_ddp(2) running in its new group: %.2f s (median of %d; best %.2f)\n",
                t.median, repetitions, t.best);
}

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const int batches = argc > 1 ? std::atoi(argv[1]) : 40;
    const int repetitions = argc > 2 ? std::atoi(argv[2]) : 9;
    if (batches < 1 || repetitions < 1) {
        std::fprintf(stderr, "usage: %s [batches >= 1] [repetitions >= 1]\n", argv[0]);
        return 2;
    }
    restart_latency(repetitions);
    checkpoint_cost(batches, repetitions);
}
