// DDP costs, in one run: group set-up latency, all-reduce throughput, training
// throughput on 1 and 2 processes, and the bucketed, overlapped all-reduce against one
// all-reduce per parameter after backward; on one machine, mpify's shared-memory group
// (the default) beside Gloo over loopback.
//
//   cmake --build build --target mpify_ddp_bench && ./build/bin/mpify_ddp_bench [steps]
//   ./build/bin/mpify_ddp_bench --train N STEPS [gloo]  (one run's samples/s; python_ddp_bench.py)
//   ./build/bin/mpify_ddp_bench --limit             (the all-reduce of 2 ranks, 4 KiB to 64 MiB,
//                                                    against Gloo, one core's memcpy and the
//                                                    exchange floor of two processes)
//   ./build/bin/mpify_ddp_bench --norms STEPS       (SyncBatchNorm2d against BatchNorm2d, 2 ranks)
//   ./build/bin/mpify_ddp_bench --precision STEPS   (compression hooks, bfloat16 autocast)
#include "timing.hpp"

#include <data/fashion_mnist.hpp>
#include <intro/cnn.hpp>
#include <resnet/resnet_model.hpp>
#include <mpify/torch.hpp>

#include <ATen/autocast_mode.h>
#include "compat/torch_compat.hpp"  // mpify's own, for the two LibTorch generations
#include <torch/torch.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::int64_t allreduce_once() {
    at::Tensor t = torch::ones({1});
    mpify::ddp::all_reduce(t);
    return t.item<std::int64_t>();
}
MPIFY_REGISTER(allreduce_once);

void noop() {}
MPIFY_REGISTER(noop);

// All-reduces `bytes` of floats `repeats` times after one untimed; GB/s of the tensor's
// size per all-reduce, as rank 0 saw it. One thread per rank, as in the training runs here:
// two ranks on two cores leave no core for LibTorch's thread pool.
double allreduce_throughput(std::int64_t bytes, int repeats) {
    torch::set_num_threads(1);
    at::Tensor t = torch::ones({bytes / 4});
    mpify::ddp::all_reduce(t);
    mpify::ddp::barrier();
    const auto start = Clock::now();
    for (int i = 0; i < repeats; ++i) mpify::ddp::all_reduce(t);
    return static_cast<double>(bytes) * repeats / seconds_since(start) / 1e9;
}
MPIFY_REGISTER(allreduce_throughput);

// One core's memcpy of `bytes`, both buffers touched first: GB/s copied, best of 5 runs of
// enough copies to take a measurable time. The limit an all-reduce is held against: a
// reduction reads two buffers and writes one, a copy reads one and writes one, so the most
// an all-reduce of `bytes` can do on one core's memory bandwidth is this divided by 1.5.
double memcpy_throughput(std::int64_t bytes) {
    std::vector<char> from(static_cast<std::size_t>(bytes), 1), to(static_cast<std::size_t>(bytes), 2);
    const std::int64_t copies = std::max<std::int64_t>(1, (64 << 20) / bytes);
    double best = 0;
    for (int run = 0; run < 5; ++run) {
        const auto start = Clock::now();
        for (std::int64_t copy = 0; copy < copies; ++copy) {
            std::memcpy(to.data(), from.data(), from.size());
            from[static_cast<std::size_t>(copy) % from.size()] = to[from.size() - 1];  // keep every copy
        }
        best = std::max(best, static_cast<double>(bytes * copies) / seconds_since(start) / 1e9);
    }
    return best;
}

// The exchange floor of an all-reduce of `bytes` between two processes: each copies its
// `bytes` into memory they share, they meet, each reads the other's, they meet again.
// Every all-reduce of two ranks moves at least this much between their cores: each rank
// needs, for every element, what the other holds (raw or already reduced), written where
// it can read it. Within the caches (up to a few MiB) that costs far more than one core's
// memcpy. A forked child and this process, spinning at their meetings; GB/s of `bytes`
// per exchange, best of 3.
double exchange_floor_throughput(std::int64_t bytes) {
    struct alignas(64) Meeting {
        std::atomic<int> arrived{0};
        alignas(64) std::atomic<int> generation{0};
    };
    const std::size_t size = static_cast<std::size_t>(bytes);
    const std::size_t mapped = 4096 + 2 * size;
    void* shared = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return 0;
    auto* meeting = new (shared) Meeting;
    char* slots = static_cast<char*>(shared) + 4096;
    auto meet = [meeting] {
        const int generation = meeting->generation.load(std::memory_order_acquire);
        if (meeting->arrived.fetch_add(1, std::memory_order_acq_rel) == 1) {
            meeting->arrived.store(0, std::memory_order_relaxed);
            meeting->generation.store(generation + 1, std::memory_order_release);
        } else {
            while (meeting->generation.load(std::memory_order_acquire) == generation) __builtin_ia32_pause();
        }
    };
    const int repeats = static_cast<int>(std::clamp<std::int64_t>((256 << 20) / bytes, 4, 2000));
    std::vector<char> mine(size);  // allocated before the fork: the child only copies and reads
    const pid_t child = ::fork();
    if (child < 0) return 0;
    const int side = child == 0 ? 1 : 0;
    std::memset(mine.data(), side + 1, size);
    // In pieces of 1 MiB, as the all-reduce goes, so that a piece stays in the caches; the
    // other's bytes are read (summed), not copied: a write of them would be more than the least.
    const std::size_t piece = std::min<std::size_t>(size, std::size_t{1} << 20);
    std::uint64_t seen = 0;
    auto exchange = [&] {
        for (std::size_t at = 0; at < size; at += piece) {
            const std::size_t count = std::min(piece, size - at);
            std::memcpy(slots + side * size + at, mine.data() + at, count);
            meet();
            const char* from = slots + (1 - side) * size + at;
            for (std::size_t i = 0; i + 8 <= count; i += 8) {
                std::uint64_t word;
                std::memcpy(&word, from + i, 8);
                seen += word;
            }
            meet();
        }
    };
    double best = 0;
    for (int run = 0; run < 4; ++run) {  // the first run warms up
        meet();
        const auto start = Clock::now();
        for (int i = 0; i < repeats; ++i) exchange();
        if (run > 0) best = std::max(best, static_cast<double>(bytes) * repeats / seconds_since(start) / 1e9);
    }
    // Every word read was the other's: 0x0101... from the parent, 0x0202... from the child.
    const std::uint64_t words = static_cast<std::uint64_t>(repeats) * 4 * (size / 8);
    const std::uint64_t expected = words * (side == 1 ? 0x0101010101010101ull : 0x0202020202020202ull);
    if (child == 0) ::_exit(seen == expected ? 0 : 1);
    int status = 0;
    ::waitpid(child, &status, 0);
    ::munmap(shared, mapped);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && seen == expected ? best : 0;
}

// The all-reduce of 2 ranks from 4 KiB to 64 MiB: mpify's shared-memory group against Gloo
// over loopback, and against one core's memory bandwidth measured in the same run (the
// fraction of the limit a reduction of two buffers can reach). Best of 3 each.
void print_allreduce_table(const mpify::Options& quiet) {
    mpify::DdpOptions gloo;
    gloo.backend = mpify::Backend::gloo;
    std::printf("\nall-reduce of floats, 2 ranks, GB/s (best of 3)\n");
    std::printf("%-8s %10s %10s %8s %10s %10s %10s %10s %10s\n", "size", "shared", "Gloo", "ratio", "memcpy", "limit",
                "fraction", "exchange", "of it");
    for (const std::int64_t kib : {4, 64, 1024, 4096, 16384, 65536}) {
        const std::int64_t bytes = kib << 10;
        const int repeats = static_cast<int>(std::clamp<std::int64_t>((256 << 20) / bytes, 4, 2000));
        double shared = 0, over_gloo = 0;
        for (int run = 0; run < 3; ++run) {
            shared =
                std::max(shared, mpify::in_ddp(mpify::DdpOptions{}, quiet, 2, allreduce_throughput, bytes, repeats));
            over_gloo = std::max(over_gloo, mpify::in_ddp(gloo, quiet, 2, allreduce_throughput, bytes, repeats));
        }
        const double copied = memcpy_throughput(bytes), limit = copied / 1.5;
        const double exchanged = exchange_floor_throughput(bytes);
        char size[16];
        std::snprintf(size, sizeof size, "%lld %s", static_cast<long long>(kib < 1024 ? kib : kib >> 10),
                      kib < 1024 ? "KiB" : "MiB");
        std::printf("%-8s %10.3g %10.3g %8.1f %10.3g %10.3g %10.2f %10.3g %10.2f\n", size, shared, over_gloo,
                    shared / over_gloo, copied, limit, shared / limit, exchanged, shared / exchanged);
    }
}

// A training run's set-up on every rank: one thread, `per_rank` Fashion-MNIST images for
// each rank, this rank's shard of them, and the seed of the model about to be made.
std::pair<mpify_examples::ImageSet, at::Tensor> training_batches(std::int64_t per_rank) {
    torch::set_num_threads(1);
    const int world = mpify::ddp::world_size();
    auto data = mpify_examples::load_fashion_mnist(true, per_rank * world);
    mpify::DistributedSampler sampler(data.images.size(0), mpify::ddp::rank(), world, true, 1);
    at::Tensor indices = torch::tensor(sampler.indices());
    torch::manual_seed(0);
    return {std::move(data), std::move(indices)};
}

// Trains `steps` batches of 64 per rank after `warmup` untimed ones (the first steps
// fault in every buffer, which is slow here); returns the group's samples per second.
// bucketed: DistributedDataParallel; otherwise one all-reduce per parameter after backward.
// hook: "bf16" or "fp16" for DistributedDataParallel's compression hooks; bf16: the forward
// and loss under CPU autocast to bfloat16.
double run_steps(int steps, bool bucketed, const std::string& hook, bool bf16) {
    const int warmup = 5;
    const int world = mpify::ddp::world_size();
    const std::int64_t batch = 64;
    const auto [data, indices] = training_batches(batch * (steps + warmup));
    auto model = std::make_shared<mpify_examples::intro::Cnn>();
    mpify::DdpModelOptions options;
    if (hook == "bf16") options.communication_hook = mpify::bf16_compress_hook();
    if (hook == "fp16") options.communication_hook = mpify::fp16_compress_hook();
    mpify::DistributedDataParallel ddp_model(model, options);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    auto start = Clock::now();
    for (int step = 0; step < warmup + steps; ++step) {
        if (step == warmup) {
            mpify::ddp::barrier();
            start = Clock::now();
        }
        const at::Tensor rows = indices.narrow(0, step * batch, batch);
        const at::Tensor x = data.images.index_select(0, rows), y = data.labels.index_select(0, rows);
        optimizer.zero_grad();
        if (bucketed) {
            mpify::detail::set_autocast(c10::DeviceType::CPU, bf16, at::kBFloat16);
            at::Tensor loss = torch::cross_entropy_loss(ddp_model(x), y);
            mpify::detail::set_autocast(c10::DeviceType::CPU, false, at::kBFloat16);
            at::autocast::clear_cache();
            loss.backward();
        } else {
            auto local = ddp_model.no_sync();  // the reducer stays out of the way
            torch::cross_entropy_loss(model->forward(x), y).backward();
        }
        if (!bucketed && world > 1) {
            for (at::Tensor& p : model->parameters()) {
                at::Tensor g = p.mutable_grad();
                mpify::ddp::all_reduce(g);
                g.div_(world);
            }
        }
        optimizer.step();
    }
    mpify::ddp::barrier();
    return static_cast<double>(batch * steps * world) / seconds_since(start);
}
double train_steps(int steps, bool bucketed) { return run_steps(steps, bucketed, "", false); }
MPIFY_REGISTER(train_steps);
double train_steps_with(int steps, std::string hook, bool bf16) { return run_steps(steps, true, hook, bf16); }
MPIFY_REGISTER(train_steps_with);

// The compression hooks and bfloat16 autocast against float32, the small CNN on 2 ranks of
// the shared-memory group (and 1 rank for autocast), best of 3 runs each, interleaved.
void print_precision_costs(const mpify::Options& quiet, int steps) {
    struct Run {
        const char* name;
        int ranks;
        const char* hook;
        bool bf16;
        double best = 0;
    };
    std::vector<Run> runs{{"float32, 1 rank", 1, "", false},        {"bf16 autocast, 1 rank", 1, "", true},
                          {"float32, 2 ranks", 2, "", false},       {"bf16 hook, 2 ranks", 2, "bf16", false},
                          {"fp16 hook, 2 ranks", 2, "fp16", false}, {"bf16 autocast, 2 ranks", 2, "", true}};
    for (int round = 0; round < 3; ++round)
        for (Run& run : runs)
            run.best = std::max(run.best, mpify::in_ddp(mpify::DdpOptions{}, quiet, run.ranks, train_steps_with, steps,
                                                        std::string(run.hook), run.bf16));
    std::printf("small CNN on Fashion-MNIST, batch 64 per rank, %d timed steps, best of 3 (samples/s)\n", steps);
    for (const Run& run : runs)
        std::printf("%-24s %8.1f   %.3f of float32 on as many ranks\n", run.name, run.best,
                    run.best / runs[run.ranks == 1 ? 0 : 2].best);
}

// The resnet example's model with norms of type Norm, trained `steps` batches of 64 per
// rank after 5 untimed: {the group's samples per second, SyncBatchNorm's collective calls
// and bytes in one step (as this rank's record of calls counts them)}.
template <class Norm>
std::vector<double> train_resnet(int steps) {
    const int warmup = 5;
    const int world = mpify::ddp::world_size();
    const std::int64_t batch = 64;
    const auto [data, indices] = training_batches(batch * (steps + warmup));
    auto model = std::make_shared<mpify_examples::resnet::SmallResNet<Norm>>();
    mpify::DistributedDataParallel ddp_model(model);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    double calls = 0, bytes = 0;
    auto start = Clock::now();
    for (int step = 0; step < warmup + steps; ++step) {
        if (step == warmup) {
            mpify::ddp::barrier();
            start = Clock::now();
        }
        const std::vector<mpify::CollectiveCall> before = mpify::ddp::recorded_calls();
        const std::uint64_t last = before.empty() ? 0 : before.back().sequence;
        const at::Tensor rows = indices.narrow(0, step * batch, batch);
        optimizer.zero_grad();
        torch::cross_entropy_loss(ddp_model(data.images.index_select(0, rows)), data.labels.index_select(0, rows))
            .backward();
        optimizer.step();
        if (step == 0)
            for (const mpify::CollectiveCall& call : mpify::ddp::recorded_calls())
                if (call.sequence > last && call.site.rfind("mpify::SyncBatchNorm", 0) == 0) {
                    ++calls;
                    bytes += static_cast<double>(call.bytes);
                }
    }
    mpify::ddp::barrier();
    return {static_cast<double>(batch * steps * world) / seconds_since(start), calls, bytes};
}
std::vector<double> train_resnet_batch_norm(int steps) { return train_resnet<torch::nn::BatchNorm2d>(steps); }
std::vector<double> train_resnet_sync_batch_norm(int steps) { return train_resnet<mpify::SyncBatchNorm2d>(steps); }
MPIFY_REGISTER(train_resnet_batch_norm);
MPIFY_REGISTER(train_resnet_sync_batch_norm);

// SyncBatchNorm2d's cost over BatchNorm2d in the resnet example's model, 2 ranks, best of
// 3 runs each, interleaved.
void print_sync_batch_norm_cost(const mpify::Options& quiet, int steps) {
    double plain = 0, synced = 0;
    std::vector<double> sync_run;
    for (int run = 0; run < 3; ++run) {
        plain = std::max(plain, mpify::in_ddp(mpify::DdpOptions{}, quiet, 2, train_resnet_batch_norm, steps)[0]);
        sync_run = mpify::in_ddp(mpify::DdpOptions{}, quiet, 2, train_resnet_sync_batch_norm, steps);
        synced = std::max(synced, sync_run[0]);
    }
    std::printf("resnet example's model, 2 ranks, batch 64 per rank, %d timed steps, best of 3 (samples/s)\n", steps);
    std::printf("BatchNorm2d %10.1f\nSyncBatchNorm2d %6.1f   ratio %.3f   (%.0f all-reduces, %.0f bytes a step)\n",
                plain, synced, synced / plain, sync_run[1], sync_run[2]);
}

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    mpify::Options quiet;
    quiet.relay = mpify::Relay::discard;
    // --train N STEPS: one training run of N ranks (the caller is rank 0), its samples per
    // second alone on stdout: what python_ddp_bench.py compares with PyTorch's Python DDP.
    // With "gloo" after them, through Gloo rather than the shared-memory group.
    if (argc > 3 && std::string(argv[1]) == "--train") {
        const int n = std::max(1, std::atoi(argv[2])), steps = std::max(5, std::atoi(argv[3]));
        mpify::DdpOptions options;
        if (argc > 4 && std::string(argv[4]) == "gloo") options.backend = mpify::Backend::gloo;
        std::printf("%.1f\n", mpify::in_ddp(options, quiet, n, train_steps, steps, true));
        return 0;
    }
    // --precision STEPS: the compression hooks and bfloat16 autocast against float32.
    if (argc > 2 && std::string(argv[1]) == "--precision") {
        print_precision_costs(quiet, std::max(5, std::atoi(argv[2])));
        return 0;
    }
    // --norms STEPS: SyncBatchNorm2d's cost over BatchNorm2d.
    if (argc > 2 && std::string(argv[1]) == "--norms") {
        print_sync_batch_norm_cost(quiet, std::max(5, std::atoi(argv[2])));
        return 0;
    }
    // --limit: the all-reduce against Gloo and one core's memcpy alone.
    if (argc > 1 && std::string(argv[1]) == "--limit") {
        print_allreduce_table(quiet);
        return 0;
    }
    const int steps = argc > 1 ? std::max(5, std::atoi(argv[1])) : 40;

    // The default group on one machine is mpify's shared-memory group; Gloo (over
    // loopback) is measured beside it.
    mpify::DdpOptions gloo;
    gloo.backend = mpify::Backend::gloo;
    std::printf("mpify DDP benchmark (one machine: the shared-memory group, and Gloo over loopback; one thread "
                "per rank)\n\n");
    std::printf("%-36s %10s %10s %10s %8s %8s\n", "", "shared (s)", "Gloo (s)", "ranch (s)", "shared/r", "Gloo/r");
    for (int n : {2, 4}) {
        const double shared =
            mpify_bench::measure(3, [&] { mpify::in_ddp(mpify::DdpOptions{}, quiet, n, allreduce_once); }).median;
        const double over_gloo = mpify_bench::measure(3, [&] { mpify::in_ddp(gloo, quiet, n, allreduce_once); }).median;
        const double plain = mpify_bench::measure(3, [&] { mpify::ranch(quiet, n, noop); }).median;
        std::printf("in_ddp(%d, allreduce) vs ranch(%d, noop) %10.3f %10.3f %10.3f %8.2f %8.2f\n", n, n, shared,
                    over_gloo, plain, shared / plain, over_gloo / plain);
    }

    print_allreduce_table(quiet);
    {
        double shared = 0, over_gloo = 0;
        for (int run = 0; run < 3; ++run) {
            shared = std::max(shared, mpify::in_ddp(mpify::DdpOptions{}, quiet, 4, allreduce_throughput,
                                                    std::int64_t{16} << 20, 10));
            over_gloo =
                std::max(over_gloo, mpify::in_ddp(gloo, quiet, 4, allreduce_throughput, std::int64_t{16} << 20, 10));
        }
        std::printf("all-reduce, 4 ranks, 16 MiB: shared %.2f GB/s, Gloo %.2f GB/s, ratio %.2f\n", shared, over_gloo,
                    shared / over_gloo);
    }

    // Best of 3 runs each, the configurations interleaved so that none is always first.
    // One process is timed twice: as the caller's own rank, and as a worker running the
    // same group of one (the caller takes no rank); their ratio is what the caller's rank
    // costs.
    std::printf("\nsmall CNN on Fashion-MNIST, batch 64 per rank, %d timed steps, best of 3\n", steps);
    mpify::Options worker_only = quiet;
    worker_only.caller_rank = std::nullopt;
    double one = 0, one_worker = 0, two = 0, two_gloo = 0, per_parameter = 0;
    for (int run = 0; run < 3; ++run) {
        one = std::max(one, mpify::in_ddp(mpify::DdpOptions{}, quiet, 1, train_steps, steps, true));
        one_worker = std::max(one_worker, mpify::in_ddp(mpify::DdpOptions{}, worker_only, 1, train_steps, steps, true));
        two = std::max(two, mpify::in_ddp(mpify::DdpOptions{}, quiet, 2, train_steps, steps, true));
        two_gloo = std::max(two_gloo, mpify::in_ddp(gloo, quiet, 2, train_steps, steps, true));
        per_parameter =
            std::max(per_parameter, mpify::in_ddp(mpify::DdpOptions{}, quiet, 2, train_steps, steps, false));
    }
    std::printf("%-36s %10.0f samples/s\n%-36s %10.0f samples/s   (caller / worker x%.2f)\n", "1 process (the caller)",
                one, "1 process (a worker)", one_worker, one / one_worker);
    std::printf("%-36s %10.0f samples/s   (x%.2f of the caller's 1)\n", "2 processes", two, two / one);
    std::printf("%-36s %10.0f samples/s   (shared memory x%.2f)\n", "2 processes, Gloo", two_gloo, two / two_gloo);

    std::printf("\n2 processes: bucketed overlapped all-reduce %10.0f samples/s\n"
                "             one all-reduce per parameter  %10.0f samples/s   (bucketed x%.2f)\n",
                two, per_parameter, two / per_parameter);
    return 0;
}
