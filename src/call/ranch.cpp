// run_ranch: the one compiled entry point behind the mpify::ranch templates.
#include "call/call.hpp"
#include "call/call_plan.hpp"
#include "spawn/launchers/launcher.hpp"

#include <mpify/detail/restarts.hpp>
#include <mpify/error.hpp>
#include <mpify/placement.hpp>
#include <mpify/ranch.hpp>

#include <fmt/format.h>
#include <mutex>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// One ranch at a time per process: LOCAL_RANK and friends are process-wide.
std::mutex ranch_in_progress;

}  // namespace

std::size_t arguments_spill_size(const Options& options, int n) {
    const int workers = n - (options.caller_rank ? 1 : 0);
    if (workers <= 0 || options.placement.launcher != Placement::Launcher::this_machine) return SIZE_MAX;
    return options.shared_memory_threshold;
}

std::vector<std::string> run_ranch(const Options& options, int n, CallRequest request,
                                   const std::function<void(bool last_attempt)>& local_call) {
    const CallPlan plan = plan_call(options, n, request);
    std::unique_lock one_call_at_a_time(ranch_in_progress, std::try_to_lock);
    if (!one_call_at_a_time.owns_lock())
        throw UsageError(fmt::format("{}: another mpify::ranch is already running in this process; ranch calls cannot "
                                     "be nested or run concurrently (LOCAL_RANK is process-wide)",
                                     plan.label));

    std::vector<std::string> results;
    run_with_restarts(options, request.function, "mpify::ranch", n, request.arguments_reusable,
                      [&](const Options& attempt, int ranks, bool last) {
                          CallPlan attempt_plan = plan;
                          attempt_plan.n = ranks;  // fewer after a machine was lost (Options::min_ranks)
                          Call call(attempt, std::move(attempt_plan));
                          try {
                              // Every attempt ships the same arguments: the last one may take them.
                              call.start_workers(last ? std::move(request.args) : request.args, request.shared_args);
                              call.run_own_rank_and_supervise([&] { local_call(last); });
                              results = call.results();
                          } catch (...) {
                              forget_launcher_answers(
                                  options.placement);  // what it learnt of the machines may be stale
                              throw;
                          }
                      });
    return results;
}

MPIFY_END_DETAIL_NAMESPACE
