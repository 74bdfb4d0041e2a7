// mpify::local_rank and local_world_size: this process's place in the current call.
#include "common/environment_number.hpp"

#include <climits>

#include <mpify/process.hpp>

namespace mpify {

// Queries that must not throw: a malformed value (set by hand, or by another launcher)
// reads as if the variable were unset.
int local_rank() {
    return static_cast<int>(detail::environment_number("LOCAL_RANK", 0, detail::Malformed::use_fallback, "mpify", 0, INT_MAX));
}

int local_world_size() {
    return static_cast<int>(detail::environment_number("LOCAL_WORLD_SIZE", 1, detail::Malformed::use_fallback, "mpify", 1, INT_MAX));
}

}  // namespace mpify
