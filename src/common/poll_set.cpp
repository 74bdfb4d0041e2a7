#include "common/poll_set.hpp"

#include <algorithm>
#include <cerrno>
#include <system_error>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

std::size_t PollSet::add(int fd, short events) {
    fds_.push_back({fd, events, 0});
    return fds_.size() - 1;
}

int PollSet::wait(std::optional<Clock::time_point> deadline) {
    int timeout = -1;  // no deadline: until something is ready
    if (deadline) {
        // Rounded up: poll's millisecond would otherwise end the wait a little early.
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
        timeout = static_cast<int>(std::clamp<long long>(left.count(), 0, longest_wait.count()));
    }
    for (pollfd& p : fds_) p.revents = 0;
    const int ready = ::poll(fds_.data(), fds_.size(), timeout);
    if (ready >= 0) return ready;
    if (errno == EINTR) return 0;
    throw std::system_error(errno, std::generic_category(), "poll");
}

std::optional<Clock::time_point> sooner(std::optional<Clock::time_point> a, std::optional<Clock::time_point> b) {
    if (!a) return b;
    if (!b) return a;
    return std::min(*a, *b);
}

MPIFY_END_DETAIL_NAMESPACE
