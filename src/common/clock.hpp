#pragma once
// The one clock of mpify's deadlines and failure times: monotonic, so a change of the
// wall clock neither fires nor postpones a timeout.
#include <chrono>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

using Clock = std::chrono::steady_clock;

/// The time from now to `deadline` in whole milliseconds, and at least 1: for waits that
/// read 0 as "do not wait" or as "wait for ever" rather than as "the time is up".
inline std::chrono::milliseconds milliseconds_left(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return left.count() > 0 ? left : std::chrono::milliseconds(1);
}

/// The deadline `wait` from now.
inline Clock::time_point deadline_in(std::chrono::milliseconds wait) { return Clock::now() + wait; }

MPIFY_END_DETAIL_NAMESPACE
