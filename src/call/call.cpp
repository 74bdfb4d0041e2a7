#include "call/call.hpp"

#include "call/deadline.hpp"
#include "call/environment.hpp"
#include "common/environment_list.hpp"
#include "common/scoped_environment.hpp"
#include "common/signal_free_thread.hpp"
#include "registry/rank_memory.hpp"
#include "spawn/launchers/launcher.hpp"
#include "spawn/start_worker.hpp"
#include "spawn/worker_host.hpp"
#include "wire/messages.hpp"
#include "wire/shared_arguments.hpp"

#include <mpify/error.hpp>
#include <mpify/ranch.hpp>
#include <mpify/version.hpp>

#include <fmt/format.h>
#include <map>

#include <unistd.h>

#include <optional>
#include <cstdint>
#include <exception>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Where mark_local_failure stamps the moment the caller's fn threw: the call that runs
// its own rank on this thread (null: none). Per thread, so that it does not rest on the
// one-call-per-process rule.
thread_local std::optional<Clock::time_point>* own_rank_failure_time = nullptr;

// Points own_rank_failure_time at `stamp` for its lifetime.
class FailureStampScope {
public:
    explicit FailureStampScope(std::optional<Clock::time_point>& stamp) noexcept
        : previous_(std::exchange(own_rank_failure_time, &stamp)) {}
    ~FailureStampScope() { own_rank_failure_time = previous_; }
    FailureStampScope(const FailureStampScope&) = delete;
    FailureStampScope& operator=(const FailureStampScope&) = delete;

private:
    std::optional<Clock::time_point>* previous_;
};

// The arguments as every worker gets them after its call's metadata: one copy shared by
// every worker's outgoing queue, or nothing when they are in shared memory.
std::shared_ptr<const std::string> inline_arguments(std::string args, const SharedArguments* shared) {
    if (shared != nullptr && shared->fd() >= 0) return std::make_shared<const std::string>();
    return std::make_shared<const std::string>(std::move(args));
}

}  // namespace

void mark_local_failure() noexcept {
    if (own_rank_failure_time != nullptr && !*own_rank_failure_time) *own_rank_failure_time = Clock::now();
}

Call::Call(const Options& options, CallPlan plan)
    : options_(options), plan_(std::move(plan)), deadline_(deadline_of(options)),
      supervisor_(options, deadline_, failures_, interrupts_) {}

void Call::start_workers(std::string args, std::shared_ptr<SharedArguments> shared) {
    if (worker_count() == 0) return;
    const WorkerHost host = choose_worker_host(plan_.function, plan_.function_name);
    const bool remote = options_.placement.launcher != Placement::Launcher::this_machine;
    if (remote && host.library.empty())
        throw UsageError(not_on_other_machines_message(plan_.label, plan_.function_name));
    // Large ones in shared memory: to_arguments_blob put them there as it wrote them, but
    // not under a file size limit (then here, if they fit it; else through the channels).
    // Shared memory does not reach other machines: there, the arguments go with the call.
    shared_arguments_ = std::move(shared);
    if (!shared_arguments_ && !args.empty() && args.size() >= arguments_spill_size(options_, plan_.n))
        shared_arguments_ = std::make_shared<SharedArguments>(args);
    const std::shared_ptr<const std::string> inline_bytes = inline_arguments(std::move(args), shared_arguments_.get());
    std::map<std::string, std::string> variables = worker_variables(options_, plan_.n);
    CallMeta meta;
    meta.mpify_version = MPIFY_VERSION_STRING;
    meta.world_size = plan_.n;
    meta.want_result = options_.gather;
    meta.function = plan_.function_name;
    meta.signature = plan_.function_signature;
    meta.library = host.library;
    meta.context_key = plan_.context_key;
    meta.context_library = plan_.context_library;
    meta.shared_args_size = shared_arguments_ ? shared_arguments_->size() : 0;
    std::vector<int> ranks;
    for (int rank = 0; rank < plan_.n; ++rank)
        if (options_.caller_rank != rank) ranks.push_back(rank);
    if (remote) {
        const Placement placement = resolve_placement(options_.placement, static_cast<int>(ranks.size()));
        remote_.emplace(placement, placed_ranks(placement, plan_.n, options_.caller_rank), plan_.n, deadline_,
                        InterruptSignal{interrupts_.fd(), [this] { return interrupts_.interrupted(); }}, variables);
    }
    try {
        // The library's path on each remote rank's machine, all asked first: a node's
        // template loads it as soon as its first agent has placed it, all nodes at once.
        std::map<int, std::string> remote_library;
        if (remote_) {
            for (int rank : ranks) remote_library[rank] = remote_->library_path(rank, host.library, deadline_);
            for (int rank : ranks) {  // every machine starts its workers at once
                variables["LOCAL_RANK"] = std::to_string(rank);
                remote_->ask_to_start(rank, variables);
            }
        }
        for (int rank : ranks) {
            variables["LOCAL_RANK"] = std::to_string(rank);
            meta.rank = rank;
            if (remote_) {
                meta.library = remote_library.at(rank);
                if (plan_.context_library == host.library) meta.context_library = meta.library;
            }
            StartedWorker worker = remote_
                                       ? remote_->start(rank, variables, options_.relay, deadline_)
                                       : start_worker(plan_.spawner, host, options_.relay, environment_with(variables),
                                                      shared_arguments_ ? shared_arguments_->fd() : -1, deadline_);
            supervisor_.add(rank, std::move(worker), call_frame_head(meta, inline_bytes->size()), inline_bytes,
                            remote_ ? remote_->host(rank) : std::string());
        }
    } catch (...) {
        supervisor_.stop_all();
        supervisor_.run();
        throw;
    }
}

void Call::run_own_rank_and_supervise(const std::function<void()>& own_rank) {
    if (!options_.caller_rank) {
        supervisor_.run();
        return;
    }
    const int rank = *options_.caller_rank;
    const ScopedEnvironment scoped(own_rank_variables(options_, rank, plan_.n));
    const CallerRankScope interruptible(interrupts_);  // what interrupt_requested() consults
    std::exception_ptr error;
    Clock::time_point error_time{};
    std::optional<Clock::time_point> thrown_at;  // stamped by mark_local_failure
    const FailureStampScope stamping(thrown_at);
    supervisor_.own_rank_started(rank, ::gettid());
    std::thread watcher = start_watcher();
    try {
        const RankMemoryScope memory = open_rank_memory();  // as every worker holds
        own_rank();
        supervisor_.own_rank_ended();
    } catch (...) {
        supervisor_.own_rank_ended();
        error = std::current_exception();
        // Stamped where fn threw, before its context unwound (ranch.hpp's with_context).
        error_time = thrown_at.value_or(Clock::now());
        supervisor_.request_stop();
    }
    // The caller's rank cannot be interrupted: past the deadline, it is reported as late.
    const bool overran_deadline = deadline_ && Clock::now() > *deadline_;
    watcher.join();
    // An interrupt the caller's rank noticed (interrupt_requested()) after every worker
    // was done: what it returned may be cut short, so the call was interrupted all the same.
    if (interrupts_.interrupted()) failures_.mark_interrupted();
    if (overran_deadline) {
        RankFailure late;
        late.rank = rank;
        late.kind = RankFailure::Kind::timed_out;
        late.message = "the caller's own rank was still running when the timeout expired";
        failures_.add(std::move(late), *deadline_);
        failures_.mark_timed_out();
    }
    if (error) failures_.caller_threw(rank, error, error_time);
}

std::thread Call::start_watcher() {
    try {
        return std::thread([this] {
            name_this_thread("mpify-watcher");
            supervisor_.run();
        });
    } catch (const std::system_error& e) {
        // Out of threads or memory: the workers are running, so stop them from this thread.
        supervisor_.stop_all();
        supervisor_.run();
        std::throw_with_nested(Error(fmt::format(
            "{}: could not start the thread that watches the workers while the caller runs its own rank ({}); "
            "every worker was stopped. This process has run out of threads or memory.",
            plan_.label, e.what())));
    }
}

std::string Call::result_of(int rank) {
    std::optional<std::string> result = supervisor_.take_result(rank);
    // A rank without a result has a recorded failure, which throw_if_failed threw.
    if (!result)
        throw Error(fmt::format("{}: rank {} ended without a result and without a recorded failure (a bug in mpify: "
                                "please report it with this message)",
                                plan_.label, rank));
    return std::move(*result);
}

std::vector<std::string> Call::results() {
    failures_.throw_if_failed(plan_.label);
    std::vector<std::string> results(static_cast<std::size_t>(plan_.n));
    if (options_.gather)
        for (int rank = 0; rank < plan_.n; ++rank)
            if (options_.caller_rank != rank) results[static_cast<std::size_t>(rank)] = result_of(rank);
    return results;
}

MPIFY_END_DETAIL_NAMESPACE
