#pragma once
// Gloo's TCP device runs one epoll loop that turns when one of its sockets has an event,
// or else every 10 ms. Three steps of a group's life wait for the loop's next turn: a
// pair that connects first unregisters its listening socket (Gloo waits for a turn, so
// that the loop calls no handler of it afterwards), every pair unregisters its socket as
// it closes, and the device's destruction joins the loop's thread. On a quiet machine
// each such wait is a full period of the loop: one to form a group of two, two to close
// it, most of what in_ddp cost over ranch (benchmarks/README.md, "Where in_ddp's time
// goes"). A GlooLoopWaker gives the loop a descriptor of its own to wake on, and while a
// Nudging scope lives a thread turns the loop every half millisecond, only across those
// steps, never while the group trains. The waker holds the device, so that the last step
// (the device's end, which the Gloo inside LibTorch 2.x must not see nudged) is its own.
#include "common/event_fd.hpp"

#include <memory>
#include <thread>

#include <mpify/abi.hpp>

namespace gloo::transport {
class Device;
}

MPIFY_BEGIN_DETAIL_NAMESPACE

class GlooLoopWaker {
public:
    /// Registers an eventfd with `device`'s loop when it is Gloo's TCP device (the only
    /// transport this LibTorch has on the CPU), and holds the device; with any other
    /// device, nudging does nothing.
    explicit GlooLoopWaker(std::shared_ptr<gloo::transport::Device> device);
    /// Lets go of the device, nudging its loop to its end when this was the device's last
    /// holder and the loop stops at its next turn (MPIFY_GLOO_LOOP_STOPS_WHEN_QUIET: not
    /// nudged, the loop stops at its first quiet turn). Closing the eventfd then takes it
    /// out of the loop's epoll set, whether the loop still runs (an abandoned group still
    /// holds the device) or is gone.
    ~GlooLoopWaker();
    GlooLoopWaker(const GlooLoopWaker&) = delete;
    GlooLoopWaker& operator=(const GlooLoopWaker&) = delete;

    /// While alive, the loop turns at least every half millisecond.
    class Nudging {
    public:
        Nudging() = default;  ///< nudges nothing
        Nudging(Nudging&&) noexcept = default;
        Nudging& operator=(Nudging&&) = delete;
        ~Nudging();  ///< stops and joins the nudging thread

    private:
        friend class GlooLoopWaker;
        struct Shared;
        std::shared_ptr<Shared> shared_;
        std::thread thread_;
    };

    /// Starts nudging; the scope must end before this waker does.
    Nudging nudge() const;

    /// The eventfd the loop watches (-1: not a TCP device), for diagnostics and tests.
    int wake_descriptor() const noexcept { return wake_ ? wake_->fd() : -1; }

private:
    std::unique_ptr<EventFd> wake_;  ///< null: not a TCP device
    std::shared_ptr<gloo::transport::Device> device_;
};

MPIFY_END_DETAIL_NAMESPACE
