#include "ddp/collective_wait.hpp"

#include "common/clock.hpp"
#include "ddp/backends/waiting_caller.hpp"
#include "ddp/active_group.hpp"
#include "ddp/future_end.hpp"
#include "forensics/call_agreement.hpp"
#include "forensics/collective_record.hpp"

#include <mpify/error.hpp>
#include <mpify/interrupt.hpp>

#include <fmt/format.h>

#include <c10/core/ScalarType.h>

#include <chrono>
#include <optional>
#include <thread>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// How often a waiting rank looks for an interrupt and for a peer in another call: well
// within the 2 s a stop may take.
constexpr std::chrono::milliseconds check_interval{100};
// A call that failed: how long its rank looks for a peer's different call, which may be
// the reason (a backend's error on a mismatch names neither call). The peer publishes its
// record as soon as its own wait fails or has lasted check_interval.
constexpr std::chrono::milliseconds mismatch_grace{300};
constexpr std::chrono::milliseconds mismatch_look_interval{20};

// A mismatch, if the store can say; a store that is gone (the peers' caller ended) says
// nothing.
std::optional<std::string> mismatch_now(const char* what, std::uint64_t sequence) {
    try {
        const ProcessGroupState& group = active_group(what);
        if (!group.store) return std::nullopt;
        const c10::intrusive_ptr<c10d::Store>& store = group.store;
        RecordExchange exchange{group.rank, group.world_size,
                                [&](const std::string& key, const std::string& text) {
                                    store->set(key, std::vector<std::uint8_t>(text.begin(), text.end()));
                                },
                                [&](const std::string& key) -> std::optional<std::string> {
                                    if (!store->check({key})) return std::nullopt;
                                    const std::vector<std::uint8_t> bytes = store->get(key);
                                    return std::string(bytes.begin(), bytes.end());
                                }};
        return find_call_mismatch(exchange, sequence);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// The failed call's mismatch with a peer, if one shows within the grace. Not when the
// call is stopping: then the failure is the stop's.
std::optional<std::string> mismatch_behind_failure(const char* what, std::uint64_t sequence) {
    const auto give_up = Clock::now() + mismatch_grace;
    while (!call_stopping()) {
        if (auto mismatch = mismatch_now(what, sequence)) return mismatch;
        if (Clock::now() >= give_up) break;
        std::this_thread::sleep_for(mismatch_look_interval);
    }
    return std::nullopt;
}

}  // namespace

std::string reduction_name(const c10d::ReduceOp& op) {
    switch (op.op_) {
        case c10d::ReduceOp::SUM: return "SUM";
        case c10d::ReduceOp::AVG: return "AVG";
        case c10d::ReduceOp::PRODUCT: return "PRODUCT";
        case c10d::ReduceOp::MIN: return "MIN";
        case c10d::ReduceOp::MAX: return "MAX";
        case c10d::ReduceOp::BAND: return "BAND";
        case c10d::ReduceOp::BOR: return "BOR";
        case c10d::ReduceOp::BXOR: return "BXOR";
        case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
        default: return fmt::format("op {}", static_cast<int>(op.op_));
    }
}

std::uint64_t record_collective(const char* operation, const at::Tensor* tensor, const std::string& detail,
                                const char* site, int bucket) {
    CallToRecord call;
    call.operation = operation;
    if (tensor != nullptr) {
        call.dtype = c10::toString(tensor->scalar_type());
        call.elements = tensor->numel();
        call.bytes = static_cast<std::uint64_t>(tensor->numel()) * tensor->element_size();
    }
    call.detail = detail;
    call.site = site;
    call.bucket = bucket;
    return record_call_started(call);
}

const char* why_the_call_stops() noexcept {
    return mpify::interrupt_requested() ? "the call was interrupted"
                                        : "the call stopped its ranks (another rank failed, or the timeout expired)";
}

namespace {

// The call this rank runs a rank of is stopping: the active group is abandoned and the
// wait ends with an error naming `what`.
[[noreturn]] void stop_waiting(const char* what) {
    abandon_active_group();
    throw Error(fmt::format("{}: {} while this rank waited for its peers; the group is abandoned (a Gloo "
                            "group's threads end when Gloo gives up on the stopped ranks)",
                            what, why_the_call_stops()));
}

}  // namespace

void wait_for_future(c10::ivalue::Future& future, const char* what) {
    FutureEnd end(future);
    while (!end.wait_for(check_interval))
        if (call_stopping()) stop_waiting(what);
    future.wait();
    if (future.hasError()) std::rethrow_exception(future.exception_ptr());
}

void wait_for_collective(c10d::Work& work, const char* what, std::uint64_t sequence) {
    // Waited on through the work's future, not Work::wait(timeout): that one reports
    // "timed out" by throwing a c10::Error (a backtrace each time), and races with a work
    // that completes just after.
    FutureEnd end(*work.getFuture());
    while (!end.wait_for(check_interval)) {
        if (call_stopping()) stop_waiting(what);
        if (sequence == 0) continue;
        if (auto mismatch = mismatch_now(what, sequence)) {
            abandon_active_group();
            record_call_ended(sequence);
            throw Error(fmt::format("{}: {}", what, *mismatch));
        }
    }
    try {
        work.wait();  // ended: returns, or rethrows the collective's failure
    } catch (const std::exception& failure) {
        record_call_ended(sequence);
        if (sequence == 0) throw;
        const std::optional<std::string> mismatch = mismatch_behind_failure(what, sequence);
        if (!mismatch) throw;
        throw Error(fmt::format("{}: {} (the backend's error: {})", what, *mismatch, failure.what()));
    }
    record_call_ended(sequence);
}

void run_collective(const char* what, std::uint64_t sequence,
                    const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
    // What the wait below looks for, looked for while the backend waits on this thread.
    bool stopping = false;
    std::optional<std::string> mismatch;
    auto next_look = Clock::now() + check_interval;
    WaitingCaller caller([&] {
        if (call_stopping()) {
            stopping = true;
            throw Error("the call is stopping");  // ends the backend's wait; reported below
        }
        if (sequence == 0 || Clock::now() < next_look) return;
        next_look = Clock::now() + check_interval;
        mismatch = mismatch_now(what, sequence);
        if (mismatch) throw Error(*mismatch);
    });
    const c10::intrusive_ptr<c10d::Work> work = start();
    caller.leave();
    if (stopping) stop_waiting(what);
    if (mismatch) {
        abandon_active_group();
        record_call_ended(sequence);
        throw Error(fmt::format("{}: {}", what, *mismatch));
    }
    wait_for_collective(*work, what, sequence);
}

MPIFY_END_DETAIL_NAMESPACE
