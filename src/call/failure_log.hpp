#pragma once
// The failures of one call and the rule that orders them: which one is the cause, and
// what ranch throws.
//
// Every failure carries when it happened (a worker stamps the moment fn threw, not when
// the caller read it; a process death, noticed at its reap, counts as up to 0.5 s
// earlier: death_noticed_late in failure_log.cpp). The first is the cause; later ones
// are usually its consequences (a collective broken by a dead peer). The caller's own
// exception is special: if it came first, and the call did not time out, it propagates
// unchanged, as if fn had run alone; otherwise it is listed, at its time, among the
// others. A failure of the call itself (the output callback threw) stopped every rank: it
// comes before all of these. An interrupt comes first of all: the user stopped the call,
// whatever broke afterwards.
#include "common/clock.hpp"

#include <mpify/error.hpp>

#include <exception>
#include <optional>
#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// What ranch throws when the call itself failed, not a rank (Options::on_output threw):
/// an mpify::Error to the user, and never a reason to restart the call.
class CallFailure : public Error {
public:
    using Error::Error;
};

class FailureLog {
public:
    /// A rank failed at `when`.
    void add(RankFailure failure, Clock::time_point when);
    /// The call's timeout expired: ranch throws TimeoutError.
    void mark_timed_out() { timed_out_ = true; }
    bool timed_out() const { return timed_out_; }
    /// request_interrupt() stopped the call: ranch throws Interrupted, before anything else.
    void mark_interrupted() { interrupted_ = true; }
    bool interrupted() const { return interrupted_; }
    /// The call itself failed (not a rank): `what` says where, `cause` is what was thrown.
    /// The first one counts.
    void call_failed(std::string what, std::exception_ptr cause);
    /// The caller's own rank threw `error` at `when`.
    void caller_threw(int rank, std::exception_ptr error, Clock::time_point when);

    /// Where ranks still running were when the call began to stop: each joins its rank's
    /// first failure (RankFailure::stack), or the Interrupted error. The first per rank counts.
    void add_stacks(std::vector<RankStack> stacks);
    /// Whether a rank has failed yet (the caller's own exception aside).
    bool any_failure() const { return !failures_.empty(); }

    /// Throws what the call failed with, by the rule above; returns if nothing failed.
    void throw_if_failed(const std::string& label);

private:
    struct Timed {
        RankFailure failure;
        Clock::time_point when;
    };
    /// When `t` happened, as far as ordering is concerned (see failure_log.cpp).
    static Clock::time_point effective_time(const Timed& t);
    std::vector<Timed> failures_;
    std::string call_failure_;
    std::exception_ptr call_failure_cause_;
    bool timed_out_ = false;
    bool interrupted_ = false;
    std::vector<RankStack> stacks_;
    std::exception_ptr caller_error_;
    int caller_rank_ = 0;
    Clock::time_point caller_error_time_{};
};

MPIFY_END_DETAIL_NAMESPACE
