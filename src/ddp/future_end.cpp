#include "ddp/future_end.hpp"

#include <condition_variable>
#include <mutex>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct FutureEnd::State {
    std::mutex mutex;
    std::condition_variable ended;
    bool done = false;
};

FutureEnd::FutureEnd(c10::ivalue::Future& future) : state_(std::make_shared<State>()) {
    // Runs at once when the future has ended already.
    future.addCallback([state = state_](c10::ivalue::Future&) {
        std::lock_guard lock(state->mutex);
        state->done = true;
        state->ended.notify_all();
    });
}

bool FutureEnd::wait_for(std::chrono::milliseconds bound) {
    std::unique_lock lock(state_->mutex);
    return state_->ended.wait_for(lock, bound, [&] { return state_->done; });
}

MPIFY_END_DETAIL_NAMESPACE
