#pragma once
// The one clock of mpify's deadlines and failure times: monotonic, so a change of the
// wall clock neither fires nor postpones a timeout.
#include <chrono>

namespace mpify::detail {

using Clock = std::chrono::steady_clock;

}  // namespace mpify::detail
