#pragma once
// A worker's life as the supervisor drives it, and the two decisions about it that need no
// process to make: how a stop proceeds (a plan, as data) and what a worker's end
// amounts to (a pure function of what was seen). The supervisor (supervisor.hpp) does
// the signalling and the reaping; the rules are here, where tests can reach them.
#include "common/clock.hpp"

#include <mpify/error.hpp>

#include <chrono>
#include <optional>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Where a worker is in its life. It only moves forward: running → terminating → killed →
/// exited, skipping any step (a worker may exit at any point; a stop without grace goes
/// from running to killed).
enum class WorkerPhase {
    running,      ///< started; nobody has asked it to stop
    terminating,  ///< we sent SIGTERM; SIGKILL is due when the grace ends
    killed,       ///< we sent SIGKILL
    exited,       ///< reaped: nothing more happens to it
};

/// How a stop proceeds: SIGTERM, then SIGKILL once `grace` has passed; SIGKILL at once
/// when there is no grace.
struct StopPlan {
    std::chrono::milliseconds grace{0};

    struct Step {
        int signal;          ///< what to send now
        WorkerPhase phase;   ///< the phase it puts the worker in
        Clock::time_point next_step_due;  ///< when the following step is due (terminating only)
    };
    /// The step that begins a stop at `now`.
    Step begin(Clock::time_point now) const;
    /// The step a terminating worker takes at `now` (SIGKILL): call once next_step_due has come.
    static Step escalate(Clock::time_point now);
};

/// How a reaped worker ended, as waitid told it.
struct ExitStatus {
    bool reaped_elsewhere = false;  ///< something else in this process took its status
    bool exited = false;            ///< it exited (status: its exit code); else a signal ended it
    int status = 0;                 ///< exit code or signal number
};

/// What the supervisor knew of a worker when it was reaped.
struct WorkerRecord {
    int rank = 0;
    WorkerPhase phase_at_exit = WorkerPhase::running;  ///< running, terminating or killed
    bool sent_result = false;
    bool failure_recorded = false;  ///< a failure of this rank is logged already
    bool left_cut_frame = false;    ///< bytes after its last whole frame
    bool remote = false;            ///< a stand-in of a rank on another machine
};

/// The failure a worker's end amounts to, or nullopt when it is none: it sent its result
/// and exited cleanly, we stopped it because of another rank (and nobody else's SIGKILL
/// ended it while its grace ran), or its failure is logged already. A remote rank's
/// stand-in that says its rank was lost is a failure even while we were stopping it: a
/// restart must know that its machine is gone, whichever rank failed first.
std::optional<RankFailure> classify_exit(const ExitStatus& status, const WorkerRecord& record);

/// Turns a lost rank's failure's stderr tail into its message: the stand-in's own line
/// ("mpify: lost rank 2@n2: why") becomes the message and leaves the tail.
void explain_lost_rank(RankFailure& failure);

MPIFY_END_DETAIL_NAMESPACE
