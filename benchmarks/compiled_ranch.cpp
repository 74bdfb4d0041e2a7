// The compiled side of kernel_bench.py: the median of `rounds` timed ranch(4, noop)
// calls after one untimed call (which starts the warm template), as a notebook cell
// measures it.
//
//   mpify_bench_compiled_ranch ROUNDS
#include <mpify/mpify.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace mpify_bench {
void noop();
}

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 20;
    mpify::ranch(4, mpify_bench::noop);
    std::vector<double> seconds;
    for (int i = 0; i < rounds; ++i) {
        const auto start = std::chrono::steady_clock::now();
        mpify::ranch(4, mpify_bench::noop);
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    std::printf("median %.6f\n", seconds[seconds.size() / 2]);
}
