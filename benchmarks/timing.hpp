#pragma once
// Timing for the benchmarks: wall times of repeated runs after one warm-up run.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

namespace mpify_bench {

/// Now on the steady clock, in nanoseconds: the one monotonic clock every process of the
/// machine shares, so ranks' times compare with the caller's.
inline std::int64_t steady_nanoseconds() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

struct Timing {
    double median;  ///< seconds
    double best;    ///< seconds
};

/// Runs `body` once and appends its wall time, in seconds, to `times`.
template <class Body>
void time_once(Body&& body, std::vector<double>& times) {
    const auto start = std::chrono::steady_clock::now();
    body();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

/// The median and the best of `times` (sorted in place).
inline Timing summary(std::vector<double>& times) {
    std::sort(times.begin(), times.end());
    return {times[times.size() / 2], times.front()};
}

/// Runs `body` once to warm up, then `repetitions` times, timing each run.
template <class Body>
Timing measure(int repetitions, Body&& body) {
    body();
    std::vector<double> times;
    for (int i = 0; i < repetitions; ++i) time_once(body, times);
    return summary(times);
}

/// Runs `first` and `second` once each to warm up, then `repetitions` times in turn
/// (first, second, first, ...), so that a machine that slows down or speeds up during the
/// run moves both alike: for a ratio of the two.
template <class First, class Second>
std::pair<Timing, Timing> measure_in_turn(int repetitions, First&& first, Second&& second) {
    first();
    second();
    std::vector<double> first_times, second_times;
    for (int i = 0; i < repetitions; ++i) {
        time_once(first, first_times);
        time_once(second, second_times);
    }
    return {summary(first_times), summary(second_times)};
}

}  // namespace mpify_bench
