// Options::restarts (include/mpify/detail/restarts.hpp). The supervisor of each attempt
// stops and reaps its ranks as without restarts; this loop decides whether to go on
// (never_retried says what it never retries).
#include "call/call_plan.hpp"
#include "call/deadline.hpp"
#include "call/failure_log.hpp"
#include "call/interrupt_watch.hpp"
#include "call/shrinking_placement.hpp"
#include "common/demangle.hpp"
#include "contract/process_contract.hpp"

#include <mpify/detail/restarts.hpp>
#include <mpify/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// What a retry cannot mend: an interrupt (the user said stop), a timeout (the deadline is
// the whole call's), a usage error, a worker that cannot be started (the next attempt
// would fail the same way), and a failure of the call itself rather than of a rank (the
// output callback threw).
bool never_retried(const std::exception_ptr& error) {
    try {
        std::rethrow_exception(error);
    } catch (const Interrupted&) {
        return true;
    } catch (const TimeoutError&) {
        return true;
    } catch (const UsageError&) {
        return true;
    } catch (const SpawnError&) {
        return true;
    } catch (const CallFailure&) {
        return true;
    } catch (...) {
        return false;
    }
}

// The failed ranks of an attempt that ended with the exception being handled: a
// WorkerError's, or else the caller's own rank, which threw it.
std::vector<RankFailure> failures_of_current_exception(const Options& options, int attempt) {
    std::vector<RankFailure> failures;
    try {
        throw;
    } catch (const WorkerError& e) {
        failures = e.failures();
    } catch (...) {
        RankFailure f;
        f.rank = options.caller_rank.value_or(-1);
        f.kind = RankFailure::Kind::threw;
        f.exception_type = current_exception_type();
        f.message = current_exception_message();
        failures.push_back(std::move(f));
    }
    for (RankFailure& f : failures) f.attempt = attempt;
    return failures;
}

// "mpify: rank 1 was killed by SIGKILL (Killed); restart 1 of 3 on 4 ranks": one line
// on the caller's stderr, which a notebook shows. `without`: the hosts left out.
void say_restart(const RankFailure& cause, int restart, int restarts, int n, const std::vector<std::string>& without) {
    std::string what = cause.headline();
    what = what.substr(0, what.find('\n'));
    std::cerr << fmt::format("mpify: {}; restart {} of {} on {} ranks{}", what, restart, restarts, n,
                             without.empty() ? "" : fmt::format(", without {}", fmt::join(without, ", ")))
              << std::endl;
}

[[noreturn]] void throw_exhausted(const std::string& label, int attempts, int restarts, const std::string& why_stopped,
                                  std::vector<RankFailure> failures, const std::exception_ptr& last) {
    const std::string how = attempts == 1 ? "failed" : fmt::format("failed on each of its {} attempts", attempts);
    const std::string context = fmt::format("{} {} (Options::restarts = {}{})", label, how, restarts, why_stopped);
    try {
        std::rethrow_exception(last);
    } catch (...) {
        std::throw_with_nested(WorkerError(context, std::move(failures)));
    }
}

}  // namespace

void run_with_restarts(const Options& options, const void* function, const char* api, int n, bool arguments_reusable,
                       const std::function<void(const Options& attempt, int n, bool last_attempt)>& attempt) {
    if (options.restarts == 0) {
        // One attempt, its errors as they are. Inside an attempt of a call that restarts
        // (in_ddp's ranch), the outer attempt's number stays.
        if (options.env.count(restart_count_env_var) != 0) return attempt(options, n, true);
        Options only = options;
        only.env[restart_count_env_var] = "0";
        return attempt(only, n, true);
    }
    const std::string label = call_label(function, n, api);
    if (options.restarts < 0)
        throw UsageError(fmt::format("{}: Options::restarts is {}; it counts restarts, 0 for none", label,
                                     options.restarts));
    if (!arguments_reusable)
        throw UsageError(fmt::format("{}: Options::restarts needs arguments that the caller's rank can pass to fn "
                                     "again, and one of them can only be moved; pass it as a copyable value, or "
                                     "set restarts to 0",
                                     label));
    ShrinkingPlacement machines(options, n, label);
    const InterruptWatch interrupts;  // an interrupt between two attempts, when no call watches, ends it too
    const std::optional<Clock::time_point> deadline = deadline_of(options);
    std::vector<RankFailure> failures;  // every failed attempt's, in order
    for (int k = 0;; ++k) {
        Options this_attempt = options;
        this_attempt.restarts = 0;
        this_attempt.placement = machines.placement();
        this_attempt.env[restart_count_env_var] = std::to_string(k);
        if (deadline) this_attempt.timeout = milliseconds_left(*deadline);
        const bool last = k == options.restarts;
        std::exception_ptr error;
        const std::size_t first_of_attempt = failures.size();
        try {
            attempt(this_attempt, machines.ranks(), last);
            return;
        } catch (...) {
            error = std::current_exception();
            if (never_retried(error)) throw;
            for (RankFailure& f : failures_of_current_exception(options, k)) failures.push_back(std::move(f));
        }
        if (last) throw_exhausted(label, k + 1, options.restarts, "", std::move(failures), error);
        if (interrupts.interrupted())
            throw Interrupted(fmt::format("{}: interrupted (mpify::request_interrupt) after attempt {} failed; "
                                          "no restart",
                                          label, k + 1));
        if (deadline && Clock::now() >= *deadline)
            throw_exhausted(label, k + 1, options.restarts, ", and Options::timeout left no time for another",
                            std::move(failures), error);
        const std::vector<RankFailure> attempt_failures(failures.begin() + static_cast<long>(first_of_attempt),
                                                        failures.end());
        const std::vector<std::string> left_out = machines.leave_out_lost(attempt_failures);
        if (const std::optional<std::string> why = machines.too_small())
            throw_exhausted(label, k + 1, options.restarts,
                            fmt::format(", and without {} {}: no restart", fmt::join(left_out, ", "), *why),
                            std::move(failures), error);
        say_restart(failures[first_of_attempt], k + 1, options.restarts, machines.ranks(), left_out);
    }
}

MPIFY_END_DETAIL_NAMESPACE
