#include "common/signal_free_thread.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>

#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

void name_this_thread(const char* name) noexcept { ::prctl(PR_SET_NAME, name); }

std::thread start_signal_free_thread(const char* name, std::function<void()> body) {
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &previous);
    try {
        std::thread thread([name = std::string(name), body = std::move(body)] {
            name_this_thread(name.c_str());
            body();
        });
        pthread_sigmask(SIG_SETMASK, &previous, nullptr);
        return thread;
    } catch (...) {
        pthread_sigmask(SIG_SETMASK, &previous, nullptr);
        throw;
    }
}

MPIFY_END_DETAIL_NAMESPACE
