#pragma once
// Reading several fds at once until each is done or a deadline passes: what a caller
// that asks other programs something and waits a bounded time for the answers needs.
#include "common/clock.hpp"

#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Reads each fd of `fds` as bytes arrive and hands every piece to
/// `take(index in fds, piece)`. An fd is done at its end of file, at a read error, or when
/// `take` returns false for it; a negative fd is done from the start. Returns which fds
/// were done when it returned: all of them, unless `deadline` came first.
std::vector<bool> read_until_done(const std::vector<int>& fds, Clock::time_point deadline,
                                  const std::function<bool(std::size_t, std::string_view)>& take);

MPIFY_END_DETAIL_NAMESPACE
