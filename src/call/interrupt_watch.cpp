#include "call/interrupt_watch.hpp"

#include <mpify/interrupt.hpp>

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

std::atomic<std::uint64_t> interrupts_requested{0};

struct Slot {
    std::atomic<bool> claimed{false};
    std::atomic<int> eventfd{-1};  // created by the first call to claim the slot, never closed
};
constexpr int slot_count = 64;
Slot slots[slot_count];

static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "request_interrupt() must be async-signal-safe");

void drain(int fd) noexcept {
    std::uint64_t count;
    while (::read(fd, &count, sizeof count) == sizeof count) {
    }
}

thread_local InterruptWatch* innermost_watch = nullptr;

// stop_on_sigint's handler: the first SIGINT while calls run interrupts them; a SIGINT
// while none runs, or a second one before they have all ended, ends the program.
std::atomic<int> calls_running{0};
std::atomic<bool> sigint_pending{false};

void on_sigint(int) {
    if (calls_running.load() == 0 || sigint_pending.exchange(true)) {
        ::signal(SIGINT, SIG_DFL);
        ::raise(SIGINT);
        return;
    }
    mpify::request_interrupt();
}

}  // namespace

InterruptWatch::InterruptWatch() : start_(interrupts_requested.load()) {
    calls_running.fetch_add(1);
    for (int i = 0; i < slot_count; ++i) {
        bool expected = false;
        if (!slots[i].claimed.compare_exchange_strong(expected, true)) continue;
        int fd = slots[i].eventfd.load();
        if (fd < 0) {
            fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
            if (fd < 0) {  // out of descriptors: fall back to looking every poll_interval_ms
                slots[i].claimed.store(false);
                return;
            }
            slots[i].eventfd.store(fd);
        }
        drain(fd);  // what an interrupt before this call left there
        slot_ = i;
        fd_ = fd;
        return;
    }
}

InterruptWatch::~InterruptWatch() {
    if (slot_ >= 0) {
        drain(fd_);
        slots[slot_].claimed.store(false);
    }
    if (calls_running.fetch_sub(1) == 1) sigint_pending.store(false);
}

bool InterruptWatch::interrupted() const noexcept { return interrupts_requested.load() != start_; }

void InterruptWatch::clear_wakeup() noexcept {
    if (fd_ >= 0) drain(fd_);
}

CallerRankScope::CallerRankScope(InterruptWatch& watch) noexcept : previous_(innermost_watch) {
    innermost_watch = &watch;
}

CallerRankScope::~CallerRankScope() { innermost_watch = previous_; }

MPIFY_END_DETAIL_NAMESPACE

MPIFY_BEGIN_NAMESPACE

void request_interrupt() noexcept {
    using namespace detail;
    const int saved_errno = errno;
    interrupts_requested.fetch_add(1);
    const std::uint64_t one = 1;
    for (Slot& slot : slots) {
        if (!slot.claimed.load()) continue;
        const int fd = slot.eventfd.load();
        if (fd >= 0) (void)!::write(fd, &one, sizeof one);
    }
    errno = saved_errno;
}

bool interrupt_requested() noexcept {
    detail::InterruptWatch* watch = detail::innermost_watch;
    return watch != nullptr && watch->interrupted();
}

namespace detail {

bool call_stopping() noexcept {
    const InterruptWatch* watch = innermost_watch;
    return watch != nullptr && watch->stopping();
}

}  // namespace detail

void stop_on_sigint() {
    struct sigaction action{};
    action.sa_handler = detail::on_sigint;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &action, nullptr);
}

MPIFY_END_NAMESPACE

extern "C" void mpify_request_interrupt() noexcept { mpify::request_interrupt(); }

extern "C" int mpify_calls_running() noexcept { return mpify::detail::calls_running.load(); }
