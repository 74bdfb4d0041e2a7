#include "common/signal_free_thread.hpp"

#include <pthread.h>
#include <signal.h>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

std::thread start_signal_free_thread(std::function<void()> body) {
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &previous);
    try {
        std::thread thread(std::move(body));
        pthread_sigmask(SIG_SETMASK, &previous, nullptr);
        return thread;
    } catch (...) {
        pthread_sigmask(SIG_SETMASK, &previous, nullptr);
        throw;
    }
}

MPIFY_END_DETAIL_NAMESPACE
