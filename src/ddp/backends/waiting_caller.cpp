#include "ddp/backends/waiting_caller.hpp"

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

thread_local const WaitingCaller* this_threads_caller = nullptr;

}  // namespace

WaitingCaller::WaitingCaller(std::function<void()> while_waiting)
    : while_waiting_(std::move(while_waiting)), previous_(this_threads_caller) {
    this_threads_caller = this;
}

WaitingCaller::~WaitingCaller() { leave(); }

void WaitingCaller::leave() noexcept {
    if (!installed_) return;
    installed_ = false;
    this_threads_caller = previous_;
}

const WaitingCaller* WaitingCaller::of_this_thread() noexcept { return this_threads_caller; }

MPIFY_END_DETAIL_NAMESPACE
