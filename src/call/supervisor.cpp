#include "call/supervisor.hpp"

#include "common/posix.hpp"
#include "wire/messages.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>
#include <system_error>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

constexpr std::chrono::milliseconds stacks_poll_interval{10};
// How long a worker may run on after its channel closed without its result or failure.
// Its own end closes the channel microseconds before the process is seen ending: one
// that runs on has closed fd 3 itself (its function, or a library it called).
constexpr std::chrono::seconds closed_channel_grace{2};

}  // namespace

struct Supervisor::Worker {
    int rank;
    std::string host;  // of a rank on another machine; else empty
    ChildProcess process;
    UniqueFd channel, out, err;
    UniqueFd control;  // a remote rank's stand-in: where it is asked where the rank is
    std::string call_head;
    std::shared_ptr<const std::string> args;
    std::size_t sent = 0;  // bytes of head + args written so far
    FrameParser frames;
    OutputRelay out_relay, err_relay;
    std::optional<std::string> result;
    bool failed = false;  // a failure for this rank is logged already
    WorkerPhase phase = WorkerPhase::running;
    Clock::time_point kill_due{};  // while terminating: when SIGKILL follows
    // Its channel closed before a result or a failure came: when it must have ended.
    std::optional<Clock::time_point> end_due;

    bool exited() const { return phase == WorkerPhase::exited; }

    Worker(const Options& options, CallerStreams& caller, int r, const std::string& h)
        : rank(r), host(h), out_relay(options, caller, r, h, Stream::out),
          err_relay(options, caller, r, h, Stream::err) {}
    std::size_t total() const { return call_head.size() + args->size(); }
};

Supervisor::Supervisor(const Options& options, std::optional<Clock::time_point> deadline, FailureLog& failures,
                       InterruptWatch& interrupts)
    : options_(options), deadline_(deadline), failures_(failures), interrupts_(interrupts) {}

Supervisor::~Supervisor() {
    for (auto& w : workers_)
        if (!w->exited()) kill_and_reap(w->process.pid, w->process.pidfd.get());
}

void Supervisor::add(int rank, StartedWorker started, std::string call_head, std::shared_ptr<const std::string> args,
                     const std::string& host) {
    auto w = std::make_unique<Worker>(options_, caller_streams_, rank, host);
    w->process = std::move(started.process);
    w->channel = std::move(started.channel);
    w->out = std::move(started.out);
    w->err = std::move(started.err);
    w->control = std::move(started.control);
    w->call_head = std::move(call_head);
    w->args = std::move(args);
    for (const UniqueFd* fd : {&w->channel, &w->out, &w->err})
        if (*fd) set_blocking(fd->get(), false);
    workers_.push_back(std::move(w));
    publish_running_ranks();
}

void Supervisor::own_rank_started(int rank, pid_t tid) noexcept { listed_.own_rank_started(rank, tid); }

void Supervisor::own_rank_ended() noexcept { listed_.own_rank_ended(); }

void Supervisor::publish_running_ranks() {
    std::vector<ListedRanks::Worker> running;
    for (const auto& w : workers_) {
        if (w->exited() || w->failed || w->result || w->phase != WorkerPhase::running) continue;
        ListedRanks::Worker listed{{w->rank, w->host, w->process.pid, 0, {}, nullptr}, w->control.get()};
        if (!w->control && !w->host.empty()) listed.target.unreadable = "not read: its stand-in has no control socket";
        running.push_back(std::move(listed));
    }
    listed_.set_workers(std::move(running));
}

void Supervisor::start_reading_stacks(const Worker* except) {
    if (!options_.stacks || stacks_read_) return;
    stacks_read_ = true;
    publish_running_ranks();
    std::vector<StackTarget> targets = listed_.targets();
    if (except != nullptr)
        targets.erase(std::remove_if(targets.begin(), targets.end(),
                                     [&](const StackTarget& t) { return t.rank == except->rank; }),
                      targets.end());
    if (targets.empty()) return;
    const std::optional<int> own_rank = listed_.own_rank();
    own_rank_read_.reset();
    if (own_rank &&
        std::any_of(targets.begin(), targets.end(), [&](const StackTarget& t) { return t.rank == *own_rank; }))
        own_rank_read_ = own_rank;
    try {
        reading_ =
            std::async(std::launch::async, [targets] { return collect_stacks(targets, stack_collection_limit); });
    } catch (const std::system_error&) {
        // No thread to read them with: the report goes without stacks.
    }
}

void Supervisor::finish_reading_stacks() {
    std::vector<RankStack> stacks = reading_.get();
    // The caller's rank that returned meanwhile (it saw the interrupt, its collective
    // broke) was read on its way out, past its function: that says nothing of where it was.
    if (own_rank_read_ && !listed_.own_rank())
        stacks.erase(std::remove_if(stacks.begin(), stacks.end(),
                                    [&](const RankStack& s) { return s.rank == *own_rank_read_; }),
                     stacks.end());
    failures_.add_stacks(std::move(stacks));
    if (stop_after_reading_) {
        stop_after_reading_ = false;
        stop_everyone();
    }
}

void Supervisor::stop_everyone() {
    if (reading_.valid()) {
        stop_after_reading_ = true;
        return;
    }
    interrupts_.mark_stopping();  // the caller's rank stops waiting for its peers
    stop_all();
}

void Supervisor::request_stop() noexcept { wake_.notify(); }

std::optional<std::string> Supervisor::take_result(int rank) {
    for (auto& w : workers_)
        if (w->rank == rank && w->result) return std::move(w->result);
    return std::nullopt;
}

void Supervisor::run() noexcept {
    try {
        while (std::any_of(workers_.begin(), workers_.end(), [](auto& w) { return !w->exited(); })) poll_once();
        if (reading_.valid()) finish_reading_stacks();  // every rank ended while it was read
        caller_streams_.drain(deadline_, [this] { return interrupts_.interrupted(); });
    } catch (...) {
        // Out of memory or the like: make sure nothing survives, the destructor reaps.
        failures_.call_failed("mpify's supervision of the workers failed:", std::current_exception());
        for (auto& w : workers_)
            if (!w->exited()) signal_child_and_group(w->process.pidfd.get(), w->process.pid, SIGKILL);
    }
}

// What an fd of the poll set is, past the supervisor's own four.
struct Supervisor::Watch {
    Worker* worker;
    enum What { pid, channel, out, err } what;
};

void Supervisor::poll_once() {
    std::vector<Watch> watches = fill_poll_set();
    if (poll_set_.wait(next_wake_time()) > 0) handle_ready_fds(watches);
    if (!failures_.interrupted() && interrupts_.interrupted()) on_interrupt();
    if (deadline_ && !failures_.timed_out() && Clock::now() >= *deadline_) on_deadline();
    if (reading_.valid() && reading_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
        finish_reading_stacks();
    for (auto& w : workers_) fail_if_running_without_channel(*w);
    escalate();
}

std::vector<Supervisor::Watch> Supervisor::fill_poll_set() {
    // fds[0]: request_stop(); fds[1]: request_interrupt() (-1 once handled: poll skips it);
    // fds[2], fds[3]: the caller's stdout and stderr, while lines wait for them (else -1).
    const bool watching_interrupts = !failures_.interrupted() && interrupts_.fd() >= 0;
    PollSet& fds = poll_set_;
    fds.clear();
    fds.add(wake_.fd(), POLLIN);
    fds.add(watching_interrupts ? interrupts_.fd() : -1, POLLIN);
    fds.add(caller_streams_.fd_to_watch(Stream::out), POLLOUT);
    fds.add(caller_streams_.fd_to_watch(Stream::err), POLLOUT);
    std::vector<Watch> watches(fds.size(), Watch{nullptr, Watch::pid});
    // A full queue for the caller's streams: the workers' output waits in their pipes.
    const bool reading_output = !caller_streams_.full();
    auto watch = [&](Worker& w, Watch::What what, int fd, short events) {
        fds.add(fd, events);
        watches.push_back({&w, what});
    };
    for (auto& w : workers_) {
        if (w->exited()) continue;
        watch(*w, Watch::pid, w->process.pidfd.get(), POLLIN);
        if (w->channel) watch(*w, Watch::channel, w->channel.get(), POLLIN | (w->sent < w->total() ? POLLOUT : 0));
        if (w->out && reading_output) watch(*w, Watch::out, w->out.get(), POLLIN);
        if (w->err && reading_output) watch(*w, Watch::err, w->err.get(), POLLIN);
    }
    return watches;
}

std::optional<Clock::time_point> Supervisor::next_wake_time() const {
    std::optional<Clock::time_point> wake_at;
    if (deadline_ && !failures_.timed_out()) wake_at = deadline_;
    // While stacks are read on another thread, this one goes on noticing what the ranks
    // do (a death counts from when it is noticed), and looks now and then for the end.
    if (reading_.valid()) wake_at = sooner(wake_at, Clock::now() + stacks_poll_interval);
    for (auto& w : workers_) {
        if (w->phase == WorkerPhase::terminating) wake_at = sooner(wake_at, w->kill_due);
        if (w->end_due && !w->exited()) wake_at = sooner(wake_at, *w->end_due);
    }
    // No eventfd for interrupts (every slot taken): look at the counter now and then.
    if (!failures_.interrupted() && interrupts_.fd() < 0)
        wake_at = sooner(wake_at, Clock::now() + std::chrono::milliseconds(InterruptWatch::poll_interval_ms));
    return wake_at;
}

void Supervisor::handle_ready_fds(const std::vector<Watch>& watches) {
    constexpr std::size_t first_worker_fd = 4;
    const PollSet& fds = poll_set_;
    if (fds.revents(0) & POLLIN) {  // the caller's rank failed
        wake_.clear();
        start_reading_stacks();
        stop_everyone();
    }
    if (fds.revents(1) & POLLIN) interrupts_.clear_wakeup();
    if (fds.revents(2)) caller_streams_.write_ready(Stream::out);
    if (fds.revents(3)) caller_streams_.write_ready(Stream::err);
    for (std::size_t i = first_worker_fd; i < fds.size(); ++i) {
        if (fds.revents(i) == 0) continue;
        Worker& w = *watches[i].worker;
        if (w.exited()) continue;
        switch (watches[i].what) {
            case Watch::pid: reap(w); break;
            case Watch::channel:
                if (fds.revents(i) & POLLOUT) write_channel(w);
                if (fds.revents(i) & (POLLIN | POLLHUP | POLLERR)) read_channel(w);
                break;
            case Watch::out: read_stream(w, Stream::out); break;
            case Watch::err: read_stream(w, Stream::err); break;
        }
    }
}

void Supervisor::read_stream(Worker& w, Stream stream) {
    UniqueFd& fd = stream == Stream::out ? w.out : w.err;
    OutputRelay& relay = stream == Stream::out ? w.out_relay : w.err_relay;
    // Once the caller's streams are behind, the rest waits in the pipe (a worker that has
    // exited is read to the end: its pipe holds what it wrote, no more).
    const auto may_read = [&] { return w.exited() || !caller_streams_.full(); };
    if (!fd || !may_read()) return;
    const DrainEnd end = drain_available(fd.get(), [&](std::string_view piece) {
        try {
            relay.feed(piece.data(), piece.size());
        } catch (...) {
            output_failed(w, stream);
        }
        return fd && may_read();
    });
    if (end == DrainEnd::closed) finish_stream(w, stream);  // nothing more will come
}

void Supervisor::finish_stream(Worker& w, Stream stream) {
    UniqueFd& fd = stream == Stream::out ? w.out : w.err;
    if (!fd) return;  // finished already
    try {
        (stream == Stream::out ? w.out_relay : w.err_relay).finish();
    } catch (...) {
        output_failed(w, stream);
    }
    fd.reset();
}

void Supervisor::output_failed(Worker& w, Stream stream) {
    failures_.call_failed(fmt::format("Options::on_output threw on a line of rank {}'s {}:", w.rank,
                                      stream == Stream::out ? "stdout" : "stderr"),
                          std::current_exception());
    for (auto& other : workers_) {
        other->out_relay.stop_forwarding();
        other->err_relay.stop_forwarding();
    }
    stop_all();
}

void Supervisor::read_channel(Worker& w) {
    if (!w.channel) return;
    std::string& buffer = channel_buffer_;
    const DrainEnd end = drain_available(w.channel.get(), buffer.data(), buffer.size(), [&](std::string_view piece) {
        try {
            w.frames.append(piece.data(), piece.size());
        } catch (const std::exception& e) {  // not a frame mpify's worker sends
            RankFailure failure;
            failure.rank = w.rank;
            failure.kind = RankFailure::Kind::protocol;
            failure.message = e.what();
            w.channel.reset();
            fail(w, std::move(failure), std::nullopt);
            return false;
        }
        Frame frame;
        while (w.channel && w.frames.next(frame)) handle_frame(w, frame);
        return static_cast<bool>(w.channel);
    });
    if (end != DrainEnd::closed) return;
    w.channel.reset();  // the worker closed its end: it is exiting
    // (A remote rank's channel is its agent's: its function cannot close it.)
    if (!w.result && !w.failed && w.phase == WorkerPhase::running && w.host.empty())
        w.end_due = Clock::now() + closed_channel_grace;
}

void Supervisor::fail_if_running_without_channel(Worker& w) {
    if (!w.end_due || Clock::now() < *w.end_due || w.exited() || w.failed || w.result) return;
    w.end_due.reset();
    RankFailure failure;
    failure.rank = w.rank;
    failure.kind = RankFailure::Kind::protocol;
    failure.message = fmt::format(
        "closed mpify's channel (fd 3) before returning and was still running {} s later: its function, or a "
        "library it called, closed a file descriptor it had not opened (a loop closing fds from 3, closefrom, "
        "close_range); close only the fds it opened",
        closed_channel_grace.count());
    fail(w, std::move(failure));
}

void Supervisor::write_channel(Worker& w) {
    while (w.channel && w.sent < w.total()) {
        const bool in_head = w.sent < w.call_head.size();
        const char* data = in_head ? w.call_head.data() + w.sent : w.args->data() + (w.sent - w.call_head.size());
        const std::size_t size = in_head ? w.call_head.size() - w.sent : w.total() - w.sent;
        const ssize_t n =
            retry_on_eintr([&] { return ::send(w.channel.get(), data, size, MSG_NOSIGNAL | MSG_DONTWAIT); });
        if (n > 0) {
            w.sent += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EAGAIN) return;
        w.sent = w.total();  // the worker is gone; its exit tells what happened
    }
    if (w.sent == w.total()) {
        // The call is delivered: let go of the arguments (they may be large).
        w.args = std::make_shared<const std::string>();
        w.call_head.clear();
        w.sent = 0;
    }
}

void Supervisor::handle_frame(Worker& w, Frame& frame) {
    if (frame.type == FrameType::result && !w.result && !w.failed) {
        w.result = std::move(frame.payload);
        publish_running_ranks();
        return;
    }
    RankFailure failure;
    failure.rank = w.rank;
    std::optional<Clock::time_point> when;
    if (frame.type == FrameType::failure) {
        try {
            const FailureInfo info = decode_failure(frame.payload);
            failure.kind = RankFailure::Kind::threw;
            failure.exception_type = info.type;
            failure.message = info.what;
            // When fn threw in the worker, not when we read it: decides which failure
            // came first when the caller's own rank failed as well.
            when = clock_time(info.when_ns);
        } catch (const std::exception& e) {
            failure.kind = RankFailure::Kind::protocol;
            failure.message = e.what();
        }
    } else {
        failure.kind = RankFailure::Kind::protocol;
        failure.message =
            fmt::format("sent an unexpected message (type {}) on mpify's channel", static_cast<int>(frame.type));
    }
    fail(w, std::move(failure), when);
}

void Supervisor::reap(Worker& w) {
    siginfo_t info{};
    // Ended, not yet reaped: what it started (its process group) ends with it, while its
    // pid still names that group.
    if (::waitid(P_PID, static_cast<id_t>(w.process.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0)
        signal_child_and_group(-1, w.process.pid, SIGKILL);
    info = siginfo_t{};
    const int waited =
        retry_on_eintr([&] { return ::waitid(P_PID, static_cast<id_t>(w.process.pid), &info, WEXITED | WNOHANG); });
    // The pidfd says it ended, yet there is no child to wait for: something else in this
    // process reaped it (a SIGCHLD handler calling waitpid(-1, ...)), and took its status.
    const bool reaped_elsewhere = waited != 0 && errno == ECHILD;
    if (waited != 0 && !reaped_elsewhere) return;
    if (!reaped_elsewhere && info.si_pid == 0) return;  // not yet
    const WorkerPhase phase_at_exit = w.phase;
    w.phase = WorkerPhase::exited;
    // Whatever the worker wrote before it exited is already buffered: take it all.
    read_channel(w);
    read_stream(w, Stream::out);
    read_stream(w, Stream::err);
    // The worker is gone, so a last line without a newline is whole, even when its pipe
    // has not reported its end (another process may still hold the write end for a while).
    finish_stream(w, Stream::out);
    finish_stream(w, Stream::err);
    w.channel.reset();
    w.process.pidfd.reset();

    publish_running_ranks();
    const ExitStatus status{reaped_elsewhere, info.si_code == CLD_EXITED, info.si_status};
    WorkerRecord record{w.rank, phase_at_exit, w.result.has_value(), w.failed, w.frames.mid_frame()};
    record.remote = !w.host.empty();
    std::optional<RankFailure> failure = classify_exit(status, record);
    if (!failure) return;
    failure->stderr_tail = w.err_relay.tail();
    if (failure->kind == RankFailure::Kind::lost) explain_lost_rank(*failure);
    fail(w, std::move(*failure));
}

void Supervisor::fail(Worker& w, RankFailure failure, std::optional<Clock::time_point> when) {
    // The first failure: where the others are, before anything tells them to stop.
    if (!failures_.any_failure() && !failures_.timed_out() && !failures_.interrupted()) start_reading_stacks(&w);
    w.failed = true;
    failure.host = w.host;
    failures_.add(std::move(failure), when.value_or(Clock::now()));
    stop_everyone();  // one rank failed: the others cannot finish a collective job
}

void Supervisor::stop(Worker& w) {
    if (w.phase != WorkerPhase::running) return;
    // Already dead, not yet reaped (a rank killed mid-collective, whose peers failed
    // first): its end is its own failure, not our stop. Peek without reaping.
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(w.process.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0)
        return;
    take_stop_step(w, StopPlan{options_.stop_grace}.begin(Clock::now()));
}

void Supervisor::take_stop_step(Worker& w, const StopPlan::Step& step) {
    signal_child_and_group(w.process.pidfd.get(), w.process.pid, step.signal);
    w.phase = step.phase;
    w.kill_due = step.next_step_due;
}

void Supervisor::stop_all() {
    for (auto& w : workers_) stop(*w);
}

void Supervisor::on_deadline() {
    start_reading_stacks();
    failures_.mark_timed_out();
    for (auto& w : workers_) {
        if (w->exited() || w->failed || w->result) continue;
        RankFailure failure;
        failure.rank = w->rank;
        failure.kind = RankFailure::Kind::timed_out;
        failure.message = "still running when the timeout expired";
        failure.host = w->host;
        w->failed = true;
        failures_.add(std::move(failure), Clock::now());
    }
    stop_everyone();
}

void Supervisor::on_interrupt() {
    start_reading_stacks();
    failures_.mark_interrupted();
    stop_everyone();
}

void Supervisor::escalate() {
    const auto now = Clock::now();
    for (auto& w : workers_)
        if (w->phase == WorkerPhase::terminating && now >= w->kill_due) take_stop_step(*w, StopPlan::escalate(now));
}

MPIFY_END_DETAIL_NAMESPACE
