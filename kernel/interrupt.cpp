#include "interrupt.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>

namespace mpify_kernel {
namespace {

using InterruptFunction = void (*)();
std::atomic<InterruptFunction> mpify_interrupt{nullptr};

void on_sigint(int) {
    // Async-signal-safe: one atomic load and mpify's own async-signal-safe entry point.
    if (InterruptFunction interrupt = mpify_interrupt.load()) interrupt();
}

sigset_t only_sigint() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    return set;
}

}  // namespace

void install_interrupt_handler() {
    struct sigaction action {};
    action.sa_handler = on_sigint;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: a cell's blocking read or sleep returns EINTR
    ::sigaction(SIGINT, &action, nullptr);
    const sigset_t set = only_sigint();
    ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void prepare_cell_for_interrupts() {
    mpify_interrupt.store(reinterpret_cast<InterruptFunction>(::dlsym(RTLD_DEFAULT, "mpify_request_interrupt")));
    const sigset_t set = only_sigint();
    ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

}  // namespace mpify_kernel
