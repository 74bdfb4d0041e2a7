#pragma once
// How a running call learns that request_interrupt() was called (from a signal handler,
// perhaps): a process-wide counter says that it was, and an eventfd per running call
// wakes the call's supervisor out of poll().
//
// A signal handler cannot lock, allocate or look things up, so the eventfds live in a
// fixed table of slots that are claimed and released but never closed: the handler may
// write to a slot's eventfd at any moment without it becoming some other file.
#include <atomic>
#include <cstdint>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

class InterruptWatch {
public:
    /// Starts watching: interrupts requested from now on count.
    InterruptWatch();
    ~InterruptWatch();
    InterruptWatch(const InterruptWatch&) = delete;
    InterruptWatch& operator=(const InterruptWatch&) = delete;

    /// Readable once an interrupt was requested; -1 when every slot is taken (then the
    /// supervisor looks at interrupted() at least every poll_interval_ms).
    int fd() const noexcept { return fd_; }
    static constexpr int poll_interval_ms = 100;

    /// An interrupt was requested since this watch started. Any thread.
    bool interrupted() const noexcept;

    /// Empties the eventfd (the supervisor, after poll() said it is readable).
    void clear_wakeup() noexcept;

    /// The call is stopping its ranks because one failed or the timeout expired (the
    /// supervisor says so): the caller's rank need not wait for its peers any longer.
    void mark_stopping() noexcept { stopping_.store(true); }
    /// Interrupted, or stopping its ranks. Any thread.
    bool stopping() const noexcept { return stopping_.load() || interrupted(); }

private:
    std::atomic<bool> stopping_{false};
    std::uint64_t start_;
    int slot_ = -1;
    int fd_ = -1;
};

/// Sets, for the calling thread, the watch that interrupt_requested() consults (the
/// innermost call's), restoring the previous one when it goes out of scope.
class CallerRankScope {
public:
    explicit CallerRankScope(InterruptWatch& watch) noexcept;
    ~CallerRankScope();
    CallerRankScope(const CallerRankScope&) = delete;
    CallerRankScope& operator=(const CallerRankScope&) = delete;

private:
    InterruptWatch* previous_;
};

MPIFY_END_DETAIL_NAMESPACE
