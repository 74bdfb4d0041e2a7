#pragma once
// Timing for the benchmarks: wall times of repeated runs after one warm-up run.
#include <algorithm>
#include <chrono>
#include <vector>

namespace mpify_bench {

struct Timing {
    double median;  ///< seconds
    double best;    ///< seconds
};

/// Runs `body` once to warm up, then `repetitions` times, timing each run.
template <class Body>
Timing measure(int repetitions, Body&& body) {
    body();
    std::vector<double> times;
    for (int i = 0; i < repetitions; ++i) {
        const auto start = std::chrono::steady_clock::now();
        body();
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    return {times[times.size() / 2], times.front()};
}

}  // namespace mpify_bench
