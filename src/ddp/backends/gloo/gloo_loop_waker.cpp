#include "ddp/backends/gloo/gloo_loop_waker.hpp"

#include "common/signal_free_thread.hpp"
#include "compat/torch_compat.hpp"

#include <gloo/transport/tcp/device.h>
#include <sys/epoll.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

constexpr std::chrono::microseconds nudge_interval{500};

// What the loop calls when the eventfd wakes it: nothing, for the turn itself is the point.
// One object for the process that is never destroyed, so that the loop of a group let go
// (abandoned, or outliving its state) can never call a handler that is gone. The eventfd
// is registered edge-triggered and never read: every write is one wake-up, and its
// counter cannot fill in the life of a process (2^64 - 2 writes).
//
// Gloo's handler is called with the events (Debian's Gloo of 2022) or with the loop and the
// events (the Gloo inside LibTorch 2.x): both are declared, without `override`, and the one
// that matches the base class overrides its pure virtual function.
class TurnOnly final : public gloo::transport::tcp::Handler {
public:
    virtual void handleEvents(int) {}
    virtual void handleEvents(gloo::transport::tcp::Loop&, int) {}
};

gloo::transport::tcp::Handler& turn_only() {
    static auto* const handler = new TurnOnly;  // leaked on purpose: see above
    return *handler;
}

}  // namespace

struct GlooLoopWaker::Nudging::Shared {
    std::mutex mutex;
    std::condition_variable stop_wanted;
    bool stop = false;  // guarded by mutex
};

GlooLoopWaker::GlooLoopWaker(std::shared_ptr<gloo::transport::Device> device) : device_(std::move(device)) {
    auto* tcp = dynamic_cast<gloo::transport::tcp::Device*>(device_.get());
    if (tcp == nullptr) return;
    wake_ = std::make_unique<EventFd>("turning Gloo's connection loop");
    tcp->registerDescriptor(wake_->fd(), EPOLLIN | EPOLLET, &turn_only());
}

GlooLoopWaker::~GlooLoopWaker() {
    // A loop that stops only at a quiet turn would never stop while nudged: it waits out
    // its own period instead.
    const Nudging nudging = MPIFY_GLOO_LOOP_STOPS_WHEN_QUIET ? Nudging{} : nudge();
    device_.reset();
}

GlooLoopWaker::Nudging GlooLoopWaker::nudge() const {
    Nudging nudging;
    if (!wake_) return nudging;
    nudging.shared_ = std::make_shared<Nudging::Shared>();
    nudging.thread_ = start_signal_free_thread("mpify-gloo-wake", [shared = nudging.shared_, wake = wake_.get()] {
        std::unique_lock lock(shared->mutex);
        while (!shared->stop) {
            wake->notify();
            shared->stop_wanted.wait_for(lock, nudge_interval);
        }
    });
    return nudging;
}

GlooLoopWaker::Nudging::~Nudging() {
    if (!thread_.joinable()) return;
    {
        std::lock_guard lock(shared_->mutex);
        shared_->stop = true;
    }
    shared_->stop_wanted.notify_one();
    thread_.join();
}

MPIFY_END_DETAIL_NAMESPACE
