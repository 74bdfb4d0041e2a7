// Functions the kernel's protocol test ranches from notebook cells (functions a worker
// runs must be compiled: see docs/notebooks.md).
#include <mpify/ddp.hpp>
#include <mpify/mpify.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace kernel_test {

/// Sleeps `seconds`; on the caller's rank it wakes up early when the call is interrupted
/// (the way a long wait on rank 0 cooperates with mpify::request_interrupt).
int sleep_seconds(int seconds) {
    if (seconds > 0) std::printf("sleeping\n"), std::fflush(stdout);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < until && !mpify::interrupt_requested())
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return mpify::local_rank();
}
MPIFY_REGISTER(sleep_seconds);

/// "Trains" for up to `seconds`: all-reduces a gradient-sized tensor again and again, as
/// DDP training does; returns how many rounds it made. Run it with mpify::in_ddp.
long all_reduce_for(int seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    at::Tensor gradient = at::ones({64 * 1024});
    long rounds = 0;
    while (std::chrono::steady_clock::now() < until) {
        mpify::ddp::all_reduce(gradient);
        gradient.fill_(1.0);
        if (++rounds == 1) std::printf("first round done\n"), std::fflush(stdout);
    }
    return rounds;
}
MPIFY_REGISTER(all_reduce_for);

}  // namespace kernel_test

/// At global scope, as a library that a notebook uses without its header defines it: the
/// cell declares `int kernel_test_square(int);` by hand, as xeus-cling users do.
int kernel_test_square(int x) { return x * x; }
