#pragma once
// Timing for the benchmarks: wall times of repeated runs after one warm-up run.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
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

/// Runs each of `bodies` once to warm up, then `repetitions` rounds of all of them in
/// turn, so that a machine that slows down or speeds up during the run moves them alike:
/// for ratios among them. Their timings, in their order.
inline std::vector<Timing> measure_each_in_turn(int repetitions, const std::vector<std::function<void()>>& bodies) {
    for (const auto& body : bodies) body();
    std::vector<std::vector<double>> times(bodies.size());
    for (int i = 0; i < repetitions; ++i)
        for (std::size_t b = 0; b < bodies.size(); ++b) time_once(bodies[b], times[b]);
    std::vector<Timing> timings;
    for (std::vector<double>& each : times) timings.push_back(summary(each));
    return timings;
}

/// measure_each_in_turn of two: (first, second, first, ...).
template <class First, class Second>
std::pair<Timing, Timing> measure_in_turn(int repetitions, First&& first, Second&& second) {
    const std::vector<Timing> timings = measure_each_in_turn(repetitions, {first, second});
    return {timings[0], timings[1]};
}

}  // namespace mpify_bench
