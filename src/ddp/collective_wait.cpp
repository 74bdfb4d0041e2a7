#include "ddp/collective_wait.hpp"

#include "ddp/active_group.hpp"

#include <mpify/error.hpp>
#include <mpify/interrupt.hpp>

#include <fmt/format.h>

#include <chrono>

namespace mpify::detail {
namespace {

// How often a waiting rank looks for an interrupt: well within the 2 s a stop may take.
constexpr std::chrono::milliseconds interrupt_check_interval{100};

}  // namespace

void wait_for_collective(c10d::Work& work, const char* what) {
    for (;;) {
        try {
            // Throws "timed out" when the interval passes, or the collective's own failure.
            if (work.wait(interrupt_check_interval)) return;
        } catch (...) {
            if (work.isCompleted()) throw;  // it ended, with a failure: that failure
        }
        if (mpify::interrupt_requested()) {
            abandon_active_group();
            throw Error(fmt::format("{}: the call was interrupted while this rank waited for its peers; the group "
                                    "is abandoned (its threads end when Gloo gives up on the stopped ranks)",
                                    what));
        }
    }
}

}  // namespace mpify::detail
