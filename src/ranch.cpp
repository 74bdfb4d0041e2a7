// run_ranch: the one compiled entry point behind the mpify::ranch templates.
#include "channel.hpp"
#include "child_process.hpp"
#include "demangle.hpp"
#include "environment.hpp"
#include "registry.hpp"
#include "shared_arguments.hpp"
#include "spawner.hpp"
#include "supervisor.hpp"
#include "worker_host.hpp"

#include <mpify/error.hpp>
#include <mpify/ranch.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fmt/format.h>
#include <mutex>
#include <thread>

namespace mpify::detail {
namespace {

// One ranch at a time per process: LOCAL_RANK and friends are process-wide.
std::mutex ranch_in_progress;

// When the caller's fn threw (see mark_local_failure); 0: it has not.
std::atomic<Clock::rep> local_failure_ticks{0};

UniqueFd open_pipe(UniqueFd& write_end) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        throw SpawnError(fmt::format("mpify: cannot create a pipe: {}", std::strerror(errno)));
    write_end.reset(fds[1]);
    return UniqueFd(fds[0]);
}

std::string unregistered_message(const void* address) {
    Dl_info info{};
    std::string name = "the function";
    if (::dladdr(address, &info) != 0 && info.dli_sname != nullptr)
        name = "'" + demangle(info.dli_sname) + "'";
    return fmt::format(
        "mpify: {} is not registered, so other processes cannot find it. Add "
        "MPIFY_REGISTER(<its name>); at namespace scope next to its definition, in the "
        "program or shared library that defines it.", name);
}

void validate(const Options& options, int n, const std::string& label) {
    if (n < 1)
        throw UsageError(fmt::format("{}: n must be at least 1 (it is {})", label, n));
    if (options.caller_rank && (*options.caller_rank < 0 || *options.caller_rank >= n))
        throw UsageError(fmt::format(
            "{}: caller_rank is {}, outside [0, {}); use a rank in that range, or "
            "std::nullopt for a caller that only waits", label, *options.caller_rank, n));
    if (options.timeout.count() < 0)
        throw UsageError(fmt::format("{}: timeout is negative", label));
    for (const auto& [name, value] : options.env)
        if (name.empty() || name.find('=') != std::string::npos)
            throw UsageError(fmt::format("{}: '{}' is not a valid environment variable name", label, name));
    struct sigaction current {};
    ::sigaction(SIGCHLD, nullptr, &current);
    if (current.sa_handler == SIG_IGN || (current.sa_flags & SA_NOCLDWAIT))
        throw UsageError(fmt::format(
            "{}: SIGCHLD is ignored in this process, so the exit status of workers cannot be "
            "read; restore its default handler (signal(SIGCHLD, SIG_DFL)) before calling ranch", label));
}

struct StartedWorker {
    ChildProcess process;
    UniqueFd channel, out, err;
};

StartedWorker start_worker(Spawner spawner, const WorkerHost& host, const Options& options,
                           std::vector<std::string> env, int shared_args_fd) {
    int channel[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) != 0)
        throw SpawnError(fmt::format("mpify: cannot create a socketpair: {}", std::strerror(errno)));
    StartedWorker w;
    w.channel.reset(channel[0]);
    UniqueFd child_channel(channel[1]);
    UniqueFd child_out, child_err;
    if (options.relay != Relay::inherit) {
        w.err = open_pipe(child_err);
        if (options.relay == Relay::lines) w.out = open_pipe(child_out);
    }
    LaunchSpec spec;
    spec.executable = host.executable;
    spec.argv = host.argv;
    spec.env = std::move(env);
    spec.channel_fd = child_channel.get();
    spec.stdout_fd = child_out.get();
    spec.stderr_fd = child_err.get();
    spec.args_fd = shared_args_fd;
    UniqueFd devnull;
    if (options.relay == Relay::discard) {
        devnull.reset(::open("/dev/null", O_WRONLY | O_CLOEXEC));
        spec.stdout_fd = devnull.get();
    }
    w.process = start_process(spawner, host, spec);
    return w;  // the child's ends close here: only the worker holds them now
}

[[noreturn]] void throw_failures(const std::string& label, bool timed_out, std::vector<TimedFailure> timed) {
    std::stable_sort(timed.begin(), timed.end(),
                     [](const TimedFailure& a, const TimedFailure& b) { return a.when < b.when; });
    std::vector<RankFailure> failures;
    for (TimedFailure& t : timed) failures.push_back(std::move(t.failure));
    if (timed_out) throw TimeoutError(label, std::move(failures));
    throw WorkerError(label, std::move(failures));
}

}  // namespace

void mark_local_failure() noexcept {
    Clock::rep expected = 0;
    local_failure_ticks.compare_exchange_strong(expected, Clock::now().time_since_epoch().count());
}

std::vector<std::string> run_ranch(const Options& options, int n, CallRequest request,
                                   const std::function<void()>& local_call) {
    FunctionEntry entry;
    const bool registered = find_function_by_address(request.function, entry);
    const std::string label =
        fmt::format("mpify::ranch({}, n={})", registered ? entry.name : std::string("?"), n);
    validate(options, n, label);
    if (!registered) throw UsageError(unregistered_message(request.function));
    if (!request.context_key.empty() && !context_registered(request.context_key.c_str()))
        throw UsageError(fmt::format(
            "{}: the context type {} is not registered; add MPIFY_REGISTER_CONTEXT(<type>); next "
            "to its definition, in the program or library the workers load",
            label, demangle(request.context_key.c_str())));

    const Spawner spawner = effective_spawner(options.spawner);

    std::unique_lock lock(ranch_in_progress, std::try_to_lock);
    if (!lock.owns_lock())
        throw UsageError(fmt::format(
            "{}: another mpify::ranch is already running in this process; ranch calls cannot "
            "be nested or run concurrently (LOCAL_RANK is process-wide)", label));

    const int workers = n - (options.caller_rank ? 1 : 0);
    const auto started = Clock::now();
    std::optional<Clock::time_point> deadline;
    if (options.timeout.count() > 0) deadline = started + options.timeout;

    Supervisor supervisor(options, deadline);
    if (workers > 0) {
        const WorkerHost host = choose_worker_host(request.function, entry.name);
        // One copy of the arguments, shared by every worker's outgoing queue, or, when
        // large, by every worker's mapping of one memfd.
        auto args = std::make_shared<const std::string>(std::move(request.args));
        UniqueFd shared_args;
        std::uint64_t shared_args_size = 0;
        if (!args->empty() && args->size() >= options.shared_memory_threshold) {
            shared_args = share_arguments(*args);
            shared_args_size = args->size();
            args = std::make_shared<const std::string>();
        }
        std::map<std::string, std::string> base = options.env;
        // Large blocks from malloc on transparent huge pages: fresh tensors and argument
        // buffers then cost a tenth to fault in (see memory.cpp). The user's own
        // GLIBC_TUNABLES, from the environment or Options::env, wins.
        if (base.count("GLIBC_TUNABLES") == 0 && std::getenv("GLIBC_TUNABLES") == nullptr)
            base["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1";
        base["LOCAL_WORLD_SIZE"] = std::to_string(n);
        base[worker_env_var] = std::to_string(worker_channel_fd);
        try {
            for (int rank = 0; rank < n; ++rank) {
                if (options.caller_rank == rank) continue;
                base["LOCAL_RANK"] = std::to_string(rank);
                StartedWorker w = start_worker(spawner, host, options, environment_with(base), shared_args.get());
                CallMeta meta;
                meta.rank = rank;
                meta.world_size = n;
                meta.want_result = options.gather;
                meta.function = entry.name;
                meta.library = host.library;
                meta.context_key = request.context_key;
                meta.shared_args_size = shared_args_size;
                std::string head = encode_call_meta(meta);
                head = frame_header(FrameType::call, head.size() + args->size()) + head;
                supervisor.add(rank, std::move(w.process), std::move(w.channel), std::move(w.out),
                               std::move(w.err), std::move(head), args);
            }
        } catch (...) {
            supervisor.stop_all();
            supervisor.run();
            throw;
        }
    }

    std::exception_ptr local_error;
    Clock::time_point local_error_time{};
    local_failure_ticks = 0;
    bool local_still_running_at_deadline = false;
    if (options.caller_rank) {
        std::map<std::string, std::string> own = options.env;
        own["LOCAL_RANK"] = std::to_string(*options.caller_rank);
        own["LOCAL_WORLD_SIZE"] = std::to_string(n);
        ScopedEnvironment scoped(own);
        std::thread watcher([&supervisor] { supervisor.run(); });
        try {
            local_call();
        } catch (...) {
            local_error = std::current_exception();
            const Clock::rep thrown_at = local_failure_ticks.load();
            local_error_time = thrown_at != 0 ? Clock::time_point(Clock::duration(thrown_at)) : Clock::now();
            supervisor.request_stop();
        }
        local_still_running_at_deadline = deadline && Clock::now() > *deadline;
        watcher.join();
    } else {
        supervisor.run();
    }

    std::vector<TimedFailure> failures = supervisor.failures();
    const bool timed_out = supervisor.timed_out() || local_still_running_at_deadline;
    if (local_still_running_at_deadline) {
        RankFailure f;
        f.rank = *options.caller_rank;
        f.kind = RankFailure::Kind::timed_out;
        f.message = "the caller's own rank was still running when the timeout expired";
        failures.push_back({std::move(f), *deadline});
    }
    if (local_error) {
        // The caller's exception is the cause unless a worker failed first; then it is
        // most likely a consequence (a collective broken by the dead worker) and is
        // reported after the worker's failure.
        const bool worker_failed_first =
            !failures.empty() && std::any_of(failures.begin(), failures.end(), [&](const TimedFailure& f) {
                return f.when <= local_error_time;
            });
        if (!worker_failed_first && !timed_out) std::rethrow_exception(local_error);
        RankFailure f;
        f.rank = *options.caller_rank;
        f.kind = RankFailure::Kind::threw;
        try {
            std::rethrow_exception(local_error);
        } catch (...) {
            f.exception_type = current_exception_type();
            f.message = current_exception_message();
        }
        failures.push_back({std::move(f), local_error_time});
    }
    if (!failures.empty()) throw_failures(label, timed_out, std::move(failures));

    std::vector<std::string> results(static_cast<std::size_t>(n));
    if (options.gather)
        for (int rank = 0; rank < n; ++rank)
            if (options.caller_rank != rank) results[static_cast<std::size_t>(rank)] = supervisor.take_result(rank);
    return results;
}

}  // namespace mpify::detail
