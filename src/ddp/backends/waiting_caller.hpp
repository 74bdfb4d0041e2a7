#pragma once
// The thread that starts a collective and waits for it at once (run_collective in
// collective_wait.hpp): while one is installed, a backend may run the collective on that
// thread instead of handing it to a thread of its own and back (mpify's shared-memory
// group does, when nothing of its own is under way). The wait then happens inside the
// backend's call, so the backend calls while_waiting() now and then, which throws to end
// it as run_collective's own wait would have ended.
#include <functional>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

class WaitingCaller {
public:
    /// Installs this thread's waiting caller until destroyed (or left); `while_waiting`
    /// throws when the wait must end.
    explicit WaitingCaller(std::function<void()> while_waiting);
    ~WaitingCaller();
    WaitingCaller(const WaitingCaller&) = delete;
    WaitingCaller& operator=(const WaitingCaller&) = delete;

    /// No longer this thread's: a collective started from now on is not run here.
    void leave() noexcept;

    /// The waiting caller of this thread, or null.
    static const WaitingCaller* of_this_thread() noexcept;

    /// Looks for a reason to stop waiting (an interrupt, a peer in another call): throws
    /// mpify::Error saying it.
    void while_waiting() const { while_waiting_(); }

private:
    std::function<void()> while_waiting_;
    const WaitingCaller* previous_;  ///< the one this replaced while it lives
    bool installed_ = true;
};

MPIFY_END_DETAIL_NAMESPACE
