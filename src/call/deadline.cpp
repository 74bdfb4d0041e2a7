#include "call/deadline.hpp"

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

std::optional<Clock::time_point> deadline_of(const Options& options) {
    if (options.timeout.count() <= 0) return std::nullopt;
    // A timeout past what the clock can hold (milliseconds::max(), 1000 years) would
    // overflow into the past: it is no timeout.
    const Clock::time_point now = Clock::now();
    const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now);
    if (options.timeout >= room) return std::nullopt;
    return now + options.timeout;
}

MPIFY_END_DETAIL_NAMESPACE
