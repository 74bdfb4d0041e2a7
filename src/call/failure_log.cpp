#include "call/failure_log.hpp"

#include "common/demangle.hpp"

#include <algorithm>
#include <fmt/format.h>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// A rank that throws stamps the moment; a process that dies is noticed when it is
// reaped, which can be after its peers saw their connections to it break and threw in
// turn. So a death counts as having happened up to this long before it was noticed:
// the killed rank comes first, its peers' broken collectives after it. A rank lost with
// its machine is a death noticed through its stand-in, later still.
constexpr std::chrono::milliseconds death_noticed_late{500};

bool is_process_death(const RankFailure& f) {
    return f.kind == RankFailure::Kind::signaled || f.kind == RankFailure::Kind::exited ||
           f.kind == RankFailure::Kind::reaped_elsewhere || f.kind == RankFailure::Kind::lost;
}

}  // namespace

Clock::time_point FailureLog::effective_time(const Timed& t) {
    return is_process_death(t.failure) ? t.when - death_noticed_late : t.when;
}

void FailureLog::add(RankFailure failure, Clock::time_point when) { failures_.push_back({std::move(failure), when}); }

void FailureLog::add_stacks(std::vector<RankStack> stacks) {
    for (RankStack& stack : stacks) {
        const bool known = std::any_of(stacks_.begin(), stacks_.end(),
                                       [&](const RankStack& other) { return other.rank == stack.rank; });
        if (!known) stacks_.push_back(std::move(stack));
    }
    std::sort(stacks_.begin(), stacks_.end(), [](const RankStack& a, const RankStack& b) { return a.rank < b.rank; });
}

void FailureLog::caller_threw(int rank, std::exception_ptr error, Clock::time_point when) {
    caller_rank_ = rank;
    caller_error_ = std::move(error);
    caller_error_time_ = when;
}

void FailureLog::call_failed(std::string what, std::exception_ptr cause) {
    if (call_failure_cause_) return;
    call_failure_ = std::move(what);
    call_failure_cause_ = std::move(cause);
}

void FailureLog::throw_if_failed(const std::string& label) {
    if (interrupted_) {
        const std::string message = label + ": interrupted (mpify::request_interrupt); every worker was stopped";
        if (!caller_error_) throw Interrupted(message, std::move(stacks_));
        try {
            std::rethrow_exception(caller_error_);  // the caller's rank, ended by the stop
        } catch (...) {
            std::throw_with_nested(Interrupted(message, std::move(stacks_)));
        }
    }
    if (call_failure_cause_) {
        try {
            std::rethrow_exception(call_failure_cause_);
        } catch (...) {
            const std::string message = current_exception_message();
            std::throw_with_nested(CallFailure(fmt::format("{}: {} {}{}; every worker was stopped", label,
                                                           call_failure_, current_exception_type(),
                                                           message.empty() ? "" : ": " + message)));
        }
    }
    if (caller_error_) {
        const bool other_failed_first = std::any_of(failures_.begin(), failures_.end(), [&](const Timed& f) {
            return effective_time(f) <= caller_error_time_;
        });
        if (!other_failed_first && !timed_out_) std::rethrow_exception(caller_error_);
        RankFailure f;
        f.rank = caller_rank_;
        f.kind = RankFailure::Kind::threw;
        try {
            std::rethrow_exception(caller_error_);
        } catch (...) {
            f.exception_type = current_exception_type();
            f.message = current_exception_message();
        }
        add(std::move(f), caller_error_time_);
    }
    if (failures_.empty()) return;
    std::stable_sort(failures_.begin(), failures_.end(),
                     [](const Timed& a, const Timed& b) { return effective_time(a) < effective_time(b); });
    std::vector<RankFailure> ordered;
    std::vector<int> given_stacks;  // a rank's stack goes with its first failure only
    for (Timed& t : failures_) {
        const int rank = t.failure.rank;
        const auto stack =
            std::find_if(stacks_.begin(), stacks_.end(), [&](const RankStack& s) { return s.rank == rank; });
        if (stack != stacks_.end() && std::find(given_stacks.begin(), given_stacks.end(), rank) == given_stacks.end()) {
            t.failure.stack = *stack;
            given_stacks.push_back(rank);
        }
        ordered.push_back(std::move(t.failure));
    }
    if (timed_out_) throw TimeoutError(label, std::move(ordered), std::move(stacks_));
    throw WorkerError(label, std::move(ordered), std::move(stacks_));
}

MPIFY_END_DETAIL_NAMESPACE
