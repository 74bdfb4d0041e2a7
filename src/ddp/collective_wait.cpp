#include "ddp/collective_wait.hpp"

#include "ddp/active_group.hpp"

#include <mpify/error.hpp>
#include <mpify/interrupt.hpp>

#include <ATen/core/ivalue.h>
#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace mpify::detail {
namespace {

// How often a waiting rank looks for an interrupt: well within the 2 s a stop may take.
constexpr std::chrono::milliseconds interrupt_check_interval{100};

// Set by the work's future when the collective ends, however it ends.
struct Completion {
    std::mutex mutex;
    std::condition_variable ended;
    bool done = false;
};

}  // namespace

void wait_for_collective(c10d::Work& work, const char* what) {
    // Waited on through the work's future, not Work::wait(timeout): that one reports
    // "timed out" by throwing a c10::Error (a backtrace each time), and races with a work
    // that completes just after.
    auto completion = std::make_shared<Completion>();
    work.getFuture()->addCallback([completion](c10::ivalue::Future&) {
        std::lock_guard lock(completion->mutex);
        completion->done = true;
        completion->ended.notify_all();
    });
    std::unique_lock lock(completion->mutex);
    while (!completion->ended.wait_for(lock, interrupt_check_interval, [&] { return completion->done; })) {
        if (!mpify::interrupt_requested()) continue;
        lock.unlock();
        abandon_active_group();
        throw Error(fmt::format("{}: the call was interrupted while this rank waited for its peers; the group is "
                                "abandoned (a Gloo group's threads end when Gloo gives up on the stopped ranks)",
                                what));
    }
    lock.unlock();
    work.wait();  // ended: returns, or rethrows the collective's failure
}

}  // namespace mpify::detail
