#include "call/worker_lifecycle.hpp"

#include "contract/remote_link.hpp"

#include <signal.h>

#include <algorithm>
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

StopPlan::Step StopPlan::begin(Clock::time_point now) const {
    if (grace.count() <= 0) return escalate(now);
    return {SIGTERM, WorkerPhase::terminating, now + grace};
}

StopPlan::Step StopPlan::escalate(Clock::time_point now) { return {SIGKILL, WorkerPhase::killed, now}; }

std::optional<RankFailure> classify_exit(const ExitStatus& status, const WorkerRecord& record) {
    // With its status gone, a worker that sent its result counts as having succeeded.
    const bool clean_exit = status.reaped_elsewhere || (status.exited && status.status == 0);
    if (record.failure_recorded || (record.sent_result && clean_exit && !record.left_cut_frame)) return std::nullopt;
    if (record.remote && status.exited && status.status == lost_rank_exit_code) {
        RankFailure lost;
        lost.rank = record.rank;
        lost.kind = RankFailure::Kind::lost;
        lost.message = "its connection to the caller closed or fell silent";
        return lost;
    }
    // Stopped because of another rank: not a failure of its own, unless a SIGKILL that
    // we had not sent (the grace was still running) ended it.
    const bool killed_by_someone_else = !status.reaped_elsewhere && !status.exited && status.status == SIGKILL &&
                                        record.phase_at_exit != WorkerPhase::killed;
    const bool stopped_by_us = record.phase_at_exit != WorkerPhase::running;
    if (stopped_by_us && !killed_by_someone_else) return std::nullopt;

    RankFailure failure;
    failure.rank = record.rank;
    if (clean_exit && record.left_cut_frame) {
        failure.kind = RankFailure::Kind::protocol;
        failure.message = "ended with part of a frame on its channel (bytes that are not a whole message)";
    } else if (status.reaped_elsewhere) {
        failure.kind = RankFailure::Kind::reaped_elsewhere;
    } else if (status.exited) {
        failure.kind = RankFailure::Kind::exited;
        failure.exit_code = status.status;
        failure.message = record.sent_result ? "after sending its result"
                                             : (status.status == 0 ? "before returning a result (did fn call exit()?)"
                                                                   : "before returning a result");
    } else {
        failure.kind = RankFailure::Kind::signaled;
        failure.signal = status.status;
        if (record.sent_result) failure.message = "after sending its result";
    }
    return failure;
}

void explain_lost_rank(RankFailure& failure) {
    std::vector<std::string>& tail = failure.stderr_tail;
    const auto said = std::find_if(tail.rbegin(), tail.rend(),
                                   [](const std::string& line) { return line.rfind(lost_rank_line_prefix, 0) == 0; });
    if (said == tail.rend()) return;
    // "mpify: lost rank 2@n2: why": the reason follows the rank's name.
    const std::size_t reason = said->find(": ", std::char_traits<char>::length(lost_rank_line_prefix));
    if (reason != std::string::npos) failure.message = said->substr(reason + 2);
    tail.erase(std::next(said).base());
}

MPIFY_END_DETAIL_NAMESPACE
