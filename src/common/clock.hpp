#pragma once
// The one clock of mpify's deadlines, failure times and recorded calls: monotonic, so a
// change of the wall clock neither fires nor postpones a timeout. It is CLOCK_MONOTONIC,
// one clock for the whole machine: a time one process reads is comparable with another's.
#include <chrono>
#include <cstdint>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

using Clock = std::chrono::steady_clock;

/// Now on Clock, in nanoseconds: a time as it travels between the processes of a machine
/// (a worker's failure, a collective call in the record).
inline std::int64_t monotonic_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

/// A time that monotonic_ns() gave, on Clock.
inline Clock::time_point clock_time(std::int64_t ns) {
    return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
}

/// The time from now to `deadline` in whole milliseconds, and at least 1: for waits that
/// read 0 as "do not wait" or as "wait for ever" rather than as "the time is up".
inline std::chrono::milliseconds milliseconds_left(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return left.count() > 0 ? left : std::chrono::milliseconds(1);
}

/// The deadline `wait` from now.
inline Clock::time_point deadline_in(std::chrono::milliseconds wait) { return Clock::now() + wait; }

MPIFY_END_DETAIL_NAMESPACE
