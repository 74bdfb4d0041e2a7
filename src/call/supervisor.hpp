#pragma once
// Watches the workers of one ranch call until every one has been reaped: sends each its
// call, relays its output, collects its result or failure, notices its exit, and stops
// the others at the first failure, at a timeout, or when the caller's own rank failed.
//
// One poll loop over every fd (pidfds included, so no SIGCHLD handler and no waitpid on
// children that are not ours); run() may run on its own thread while the caller's rank
// computes: request_stop() is the only call that is safe from another thread.
#include "call/caller_streams.hpp"
#include "call/failure_log.hpp"
#include "call/interrupt_watch.hpp"
#include "call/output_relay.hpp"
#include "call/worker_lifecycle.hpp"
#include "common/event_fd.hpp"
#include "common/poll_set.hpp"
#include "common/unique_fd.hpp"
#include "forensics/listed_ranks.hpp"
#include "spawn/start_worker.hpp"
#include "wire/frames.hpp"

#include <mpify/options.hpp>

#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

class Supervisor {
public:
    /// `deadline`: when to give up (nullopt: never). Failures go to `failures`. An
    /// interrupt that `interrupts` sees stops every worker.
    Supervisor(const Options& options, std::optional<Clock::time_point> deadline, FailureLog& failures,
               InterruptWatch& interrupts);
    ~Supervisor();  // kills and reaps anything still running: nothing outlives a ranch
    Supervisor(const Supervisor&) = delete;
    Supervisor& operator=(const Supervisor&) = delete;

    /// Takes charge of a started worker; run() sends it `call_head` then `args`. `host`:
    /// the machine of a rank on another one (its stand-in is the worker here), else empty.
    void add(int rank, StartedWorker started, std::string call_head, std::shared_ptr<const std::string> args,
             const std::string& host = {});

    /// Supervises until every worker has exited and been reaped, then gives the caller's
    /// streams a bounded time to take the workers' last lines. Does not throw.
    void run() noexcept;

    /// Thread-safe: stop every worker (the caller's rank failed); run() still reaps them.
    void request_stop() noexcept;

    /// Stops every worker now (SIGTERM, SIGKILL after the grace). Not thread-safe.
    void stop_all();

    /// The result blob a rank sent (moved out); nullopt if it sent none.
    std::optional<std::string> take_result(int rank);

    /// The caller's own rank `rank` runs on thread `tid` of this process from now until
    /// own_rank_ended(): its stack is read with the workers'. Thread-safe.
    void own_rank_started(int rank, pid_t tid) noexcept;
    void own_rank_ended() noexcept;

private:
    struct Worker;
    struct Watch;
    /// One round: waits for what the poll set watches (or the next timer) and handles it.
    void poll_once();
    /// Fills poll_set_ for a round; what each worker fd is.
    std::vector<Watch> fill_poll_set();
    /// The deadline, a terminating rank's SIGKILL, the next look at a pending reading...
    std::optional<Clock::time_point> next_wake_time() const;
    void handle_ready_fds(const std::vector<Watch>& watches);
    void read_stream(Worker& w, Stream stream);
    // Ends a worker's stream: its relay emits what is left (a last line without a newline)
    // and the pipe is closed. Once per stream.
    void finish_stream(Worker& w, Stream stream);
    /// The output callback threw (inside a catch block): the call fails, every rank stops.
    void output_failed(Worker& w, Stream stream);
    void read_channel(Worker& w);
    /// A worker still running past the grace after its channel closed without a result
    /// has closed fd 3 itself: it fails (else only the timeout would find it).
    void fail_if_running_without_channel(Worker& w);
    void write_channel(Worker& w);
    void handle_frame(Worker& w, Frame& frame);
    void reap(Worker& w);
    /// Records a failure (seen now, unless the worker said when) and stops the others.
    void fail(Worker& w, RankFailure failure, std::optional<Clock::time_point> when = std::nullopt);
    /// Begins stopping `w` as Options::stop_grace plans, unless it is stopping already.
    void stop(Worker& w);
    /// Sends the step's signal and moves `w` to the step's phase.
    void take_stop_step(Worker& w, const StopPlan::Step& step);
    /// Options::stacks: begins reading where the ranks still running are (all but
    /// `except`), on another thread, for the failure report. Once per call.
    void start_reading_stacks(const Worker* except = nullptr);
    /// Takes what the reading found, then stops the ranks if that waited for it.
    void finish_reading_stacks();
    /// Tells the caller's rank to stop waiting and stops every worker: now, or once their
    /// stacks are read (a rank stopped first would be read on its way out).
    void stop_everyone();
    /// Keeps the call's listed ranks up to date (after a worker came or went).
    void publish_running_ranks();
    void on_deadline();
    void on_interrupt();
    void escalate();

    const Options& options_;
    std::optional<Clock::time_point> deadline_;
    std::vector<std::unique_ptr<Worker>> workers_;
    FailureLog& failures_;
    InterruptWatch& interrupts_;
    EventFd wake_{"the call's stop"};  // notified by request_stop()
    CallerStreams caller_streams_;  // where the workers' lines go, unless Options::on_output takes them
    std::string channel_buffer_ = std::string(1 << 20, '\0');  // reused by every read
    PollSet poll_set_;  // reused by every round
    bool stacks_read_ = false;
    std::future<std::vector<RankStack>> reading_;  // while stacks are being read
    std::optional<int> own_rank_read_;  // the caller's rank, if the reading includes it
    bool stop_after_reading_ = false;
    ListedRanks listed_;  // what mpify::where() reads of this call
};

MPIFY_END_DETAIL_NAMESPACE
