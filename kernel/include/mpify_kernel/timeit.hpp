#pragma once
// %timeit and %%timeit, as IPython (and xeus-cling) report them: the kernel turns
//
//   %timeit -n 100 -r 5 v.push_back(1)
//
// into `::mpify_kernel_timeit::run([] { v.push_back(1); }, 100, 5);`. Without -n, the
// number of loops grows (1, 2, 5, 10, 20, ...) until one run takes 0.2 s; without -r,
// 7 runs. Prints "mean ± std per loop (mean ± std. dev. of R runs, N loops each)".
//
// Compiled by the kernel's interpreter: header-only, no statics, no threads.
#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace mpify_kernel_timeit {

/// "1.23 ms", "45.6 ns": three significant digits in the largest unit that keeps the
/// number at least 1 (seconds at most), as IPython's _format_time.
inline std::string format_time(double seconds) {
    static const char* const units[] = {"s", "ms", "\xc2\xb5s", "ns"};
    int order = 3;
    if (seconds > 0)
        order = std::max(0, std::min(3, -static_cast<int>(std::floor(std::floor(std::log10(seconds)) / 3.0))));
    double scaled = seconds * std::pow(1000.0, order);
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.3g %s", scaled, units[order]);
    return buffer;
}

/// 1000000 -> "1,000,000".
inline std::string with_thousands(long long n) {
    std::string digits = std::to_string(n), out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

template <class Body>
double seconds_for(Body& body, long long loops) {
    const auto start = std::chrono::steady_clock::now();
    for (long long i = 0; i < loops; ++i) body();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Times `body`: `loops` calls per run (0: chosen), `runs` runs (0: 7); prints the line.
template <class Body>
void run(Body body, long long loops = 0, int runs = 0) {
    if (runs <= 0) runs = 7;
    if (loops <= 0) {
        // IPython's autorange: 1, 2, 5, 10, 20, 50, ... until a run takes 0.2 s.
        for (long long base = 1;; base *= 10) {
            bool enough = false;
            for (long long factor : {1, 2, 5}) {
                loops = base * factor;
                if (seconds_for(body, loops) >= 0.2) {
                    enough = true;
                    break;
                }
            }
            if (enough || base >= 1000000000LL) break;
        }
    }
    std::vector<double> per_loop;
    for (int r = 0; r < runs; ++r) per_loop.push_back(seconds_for(body, loops) / static_cast<double>(loops));
    double mean = 0;
    for (double t : per_loop) mean += t;
    mean /= static_cast<double>(per_loop.size());
    double variance = 0;
    for (double t : per_loop) variance += (t - mean) * (t - mean);
    const double deviation = std::sqrt(variance / static_cast<double>(per_loop.size()));
    std::printf("%s \xc2\xb1 %s per loop (mean \xc2\xb1 std. dev. of %d run%s, %s loop%s each)\n",
                format_time(mean).c_str(), format_time(deviation).c_str(), runs, runs == 1 ? "" : "s",
                with_thousands(loops).c_str(), loops == 1 ? "" : "s");
    std::fflush(stdout);
}

}  // namespace mpify_kernel_timeit
