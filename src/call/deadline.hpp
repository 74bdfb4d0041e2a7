#pragma once
// When a call with Options::timeout must be over.
#include "common/clock.hpp"

#include <mpify/options.hpp>

#include <optional>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Now + options.timeout; none without a timeout, or for one past what the clock can hold.
std::optional<Clock::time_point> deadline_of(const Options& options);

MPIFY_END_DETAIL_NAMESPACE
