// Spawn and argument-shipping costs of mpify::ranch, each against its floor, in one run.
//
//   cmake --build build --target mpify_bench && ./build/bin/mpify_bench [repetitions]
//
// Floors: starting and reaping n-1 copies of a trivial program linked with LibTorch
// (what any exec-based launcher pays), and copying the argument once in memory.
#include "timing.hpp"

#include <mpify/mpify.hpp>

#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

void noop() {}
MPIFY_REGISTER(noop);

std::size_t byte_count(const std::string& blob) { return blob.size(); }
MPIFY_REGISTER(byte_count);

using mpify_bench::measure;

// Starts `count` copies of `program` at once and waits for all of them.
void spawn_and_reap(const std::string& program, int count) {
    std::vector<pid_t> pids;
    char* argv[] = {const_cast<char*>(program.c_str()), nullptr};
    for (int i = 0; i < count; ++i) {
        pid_t pid;
        if (posix_spawn(&pid, program.c_str(), nullptr, nullptr, argv, environ) == 0) pids.push_back(pid);
    }
    for (pid_t pid : pids) waitpid(pid, nullptr, 0);
}

std::string sibling(const char* argv0, const char* name) {
    std::string self(argv0);
    const auto slash = self.rfind('/');
    return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/" + name;
}

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const int repetitions = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
    const std::string floor_program = sibling(argv[0], "mpify_bench_trivial_torch_program");

    std::printf("mpify spawn benchmark: median of %d runs (n-1 workers per call; the caller is rank 0)\n\n",
                repetitions);
    std::printf("%-40s %10s %10s %8s\n", "", "mpify (s)", "floor (s)", "ratio");
    for (int n : {1, 2, 4}) {
        const double floor = measure(repetitions, [&] { spawn_and_reap(floor_program, n - 1); }).median;
        const double ranch = measure(repetitions, [&] { mpify::ranch(n, noop); }).median;
        char ratio[32] = "-";  // n = 1 starts no process: there is no floor to compare with
        if (n > 1) std::snprintf(ratio, sizeof ratio, "%.2f", ranch / floor);
        std::printf("ranch(%d, noop) vs %d x (exec + reap)      %10.4f %10.4f %8s\n", n, n - 1, ranch, floor, ratio);
    }

    // Shipping cost alone: the same call with an empty argument is subtracted (best of
    // the runs, which is steadier than the median when the difference is small).
    std::printf("\n%-40s %10s %10s %8s\n", "argument to n = 2 workers", "mpify MB/s", "memcpy", "ratio");
    mpify::Options two_workers;
    two_workers.caller_rank = std::nullopt;
    const int shipping_runs = std::max(repetitions, 7);
    const double empty = measure(shipping_runs, [&] { mpify::ranch(two_workers, 2, byte_count, std::string()); }).best;
    for (std::size_t mib : {1u, 64u}) {
        const std::string blob(mib << 20, 'x');
        const double with_blob = measure(shipping_runs, [&] { mpify::ranch(two_workers, 2, byte_count, blob); }).best;
        std::string copy(blob.size(), '\0');
        const double copy_time =
            measure(shipping_runs, [&] { std::memcpy(copy.data(), blob.data(), blob.size()); }).best;
        const double shipped_mb = 2.0 * static_cast<double>(blob.size()) / 1e6;
        const double net = with_blob - empty;
        const double copy_rate = static_cast<double>(blob.size()) / 1e6 / copy_time;
        if (net <= 0) {
            std::printf("%3zu MiB: below the noise of the spawn (%.4f s with it, %.4f s without)\n", mib, with_blob,
                        empty);
            continue;
        }
        const double rate = shipped_mb / net;
        std::printf("%3zu MiB (%.3f s net of spawn)             %10.0f %10.0f %8.3f\n", mib, net, rate, copy_rate,
                    rate / copy_rate);
    }
    return 0;
}
