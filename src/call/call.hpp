#pragma once
// One ranch call, in the phases docs/api.md describes: start the workers and send each
// its call; run the caller's own rank while a supervisor watches the workers; then
// either throw what failed (failure_log.hpp) or hand back every rank's result.
#include "call/call_plan.hpp"
#include "call/failure_log.hpp"
#include "call/supervisor.hpp"
#include "spawn/remote_ranks.hpp"
#include "wire/shared_arguments.hpp"

#include <mpify/options.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

class Call {
public:
    Call(const Options& options, CallPlan plan);

    /// Starts every worker and queues its call (metadata and `args`, the serialized
    /// arguments, or `shared`, when to_arguments_blob put them in shared memory). If one
    /// cannot start, those already started are stopped and reaped before the error leaves.
    void start_workers(std::string args, std::shared_ptr<SharedArguments> shared);

    /// Runs `own_rank` as the caller's rank, with its LOCAL_RANK, while the supervisor
    /// watches the workers on another thread; without a caller rank, only watches.
    /// Returns when every worker has been reaped.
    void run_own_rank_and_supervise(const std::function<void()>& own_rank);

    /// Throws what failed, or returns each rank's result blob, indexed by rank (empty for
    /// the caller's rank and when results are not gathered).
    std::vector<std::string> results();

private:
    /// The thread that runs the supervisor beside the caller's rank. If it cannot start,
    /// stops and reaps the workers, then throws Error with the system_error nested.
    std::thread start_watcher();
    /// A worker's result; a missing one (which a recorded failure explains) is a bug.
    std::string result_of(int rank);
    int worker_count() const { return plan_.n - (options_.caller_rank ? 1 : 0); }

    const Options& options_;
    const CallPlan plan_;
    const std::optional<Clock::time_point> deadline_;
    FailureLog failures_;
    InterruptWatch interrupts_;  // before the workers start: an interrupt while they start counts
    std::shared_ptr<SharedArguments> shared_arguments_;  // large arguments; the next call rewrites
                                                         // them, so they outlive the reaping
    std::optional<RemoteRanks> remote_;  // ranks on other machines; outlives the supervisor's reaping
    Supervisor supervisor_;
};

MPIFY_END_DETAIL_NAMESPACE
