// One machine's part of the several-machines benchmark (run by machines_bench.py):
// all-reduce bandwidth of 1, 16 and 64 MiB in a group of 4, and how long in_ddp takes
// to form that group (spawning included), median of 5 calls each.
//   mpify_bench_machines across N   this machine's place from the launcher's variables
//   mpify_bench_machines one N      all N ranks on this machine
// Prints "allreduce <MiB> MiB: <GB/s> GB/s" and "group formed: <s> s".
#include <mpify/ddp.hpp>
#include <mpify/ddp_guard.hpp>
#include <mpify/mpify.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
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

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    if (argc != 3 || (std::strcmp(argv[1], "across") != 0 && std::strcmp(argv[1], "one") != 0)) {
        std::fprintf(stderr, "usage: mpify_bench_machines across|one N\n");
        return 2;
    }
    const int n = std::atoi(argv[2]);
    mpify::DdpOptions options;
    if (std::strcmp(argv[1], "across") == 0) options = mpify::DdpOptions::from_environment();
    // Gloo on both sides: the comparison is of its transport through a veth pair against
    // loopback (one machine's default, the shared-memory group, is mpify_ddp_bench's).
    options.backend = mpify::Backend::gloo;
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
