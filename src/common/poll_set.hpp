#pragma once
// One wait of a poll loop: the fds to watch this round and until when. Every loop of
// mpify that waits on several fds (the supervisor, the store's server, the warm
// template's client, the kernel's output capture) waits through this: the deadline
// becomes poll's timeout in one place (rounded up, so a wait never ends just before its
// deadline and spins; capped, so a far deadline still wakes the loop now and then), and
// a signal's interruption is a wake-up with nothing ready rather than an error.
#include "common/clock.hpp"

#include <poll.h>

#include <cstddef>
#include <optional>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

class PollSet {
public:
    /// The longest single wait: a loop re-checks its state at least this often.
    static constexpr std::chrono::milliseconds longest_wait{60'000};

    /// Watches `fd` for `events` this round (a negative fd is kept in place and never
    /// ready). Returns the index that revents() takes.
    std::size_t add(int fd, short events);
    /// Waits until a watched fd is ready or `deadline` has come (nullopt: no deadline).
    /// Returns how many are ready (0: the deadline came, or a signal woke it); throws
    /// std::system_error for anything else poll reports.
    int wait(std::optional<Clock::time_point> deadline);
    /// What poll reported for the fd added as `index` (0: nothing).
    short revents(std::size_t index) const { return fds_[index].revents; }
    /// Forgets every fd: the next round adds its own.
    void clear() { fds_.clear(); }
    std::size_t size() const { return fds_.size(); }

private:
    std::vector<pollfd> fds_;
};

/// The soonest of two optional deadlines (nullopt: none).
std::optional<Clock::time_point> sooner(std::optional<Clock::time_point> a, std::optional<Clock::time_point> b);

MPIFY_END_DETAIL_NAMESPACE
