#include "ddp/sigpipe_block.hpp"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

SigpipeBlock::SigpipeBlock() {
    sigset_t pipe, previous;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, &previous);
    was_blocked_ = sigismember(&previous, SIGPIPE) == 1;
}

SigpipeBlock::~SigpipeBlock() {
    if (was_blocked_) return;  // blocked before us: the application's choice, left as it is
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    // A SIGPIPE raised by a write of this thread is pending for it: take it, or unblocking
    // would deliver it now.
    const timespec no_wait{0, 0};
    while (sigtimedwait(&pipe, nullptr, &no_wait) == SIGPIPE) {
    }
    pthread_sigmask(SIG_UNBLOCK, &pipe, nullptr);
}

MPIFY_END_DETAIL_NAMESPACE
