#include "ddp/collective_wait.hpp"

#include "ddp/active_group.hpp"
#include "ddp/future_end.hpp"

#include <mpify/error.hpp>
#include <mpify/interrupt.hpp>

#include <fmt/format.h>

#include <chrono>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// How often a waiting rank looks for an interrupt: well within the 2 s a stop may take.
constexpr std::chrono::milliseconds interrupt_check_interval{100};

}  // namespace

void wait_for_collective(c10d::Work& work, const char* what) {
    // Waited on through the work's future, not Work::wait(timeout): that one reports
    // "timed out" by throwing a c10::Error (a backtrace each time), and races with a work
    // that completes just after.
    FutureEnd end(*work.getFuture());
    while (!end.wait_for(interrupt_check_interval)) {
        if (!call_stopping()) continue;
        abandon_active_group();
        throw Error(fmt::format("{}: {} while this rank waited for its peers; the group is abandoned (a Gloo "
                                "group's threads end when Gloo gives up on the stopped ranks)",
                                what,
                                mpify::interrupt_requested() ? "the call was interrupted"
                                                             : "the call stopped its ranks (another rank failed, or "
                                                               "the timeout expired)"));
    }
    work.wait();  // ended: returns, or rethrows the collective's failure
}

MPIFY_END_DETAIL_NAMESPACE
