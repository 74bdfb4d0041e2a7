#include "spawn/remote_ranks.hpp"

#include "common/debug_log.hpp"
#include "common/endpoint.hpp"
#include "common/environment_list.hpp"
#include "common/poll_set.hpp"
#include "common/posix.hpp"
#include "common/shell_quoted.hpp"
#include "contract/process_contract.hpp"
#include "contract/remote_link.hpp"
#include "spawn/command_output.hpp"
#include "spawn/exec_spawner.hpp"
#include "spawn/library_shipping.hpp"
#include "spawn/worker_host.hpp"

#include <mpify/error.hpp>
#include <mpify/version.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// How much of a launcher's output is kept for the error that names it.
constexpr std::size_t launcher_tail_bytes = 2048;
// How long launchers have to end by themselves once the call is over, before SIGTERM;
// and after SIGTERM, before SIGKILL.
constexpr std::chrono::milliseconds launcher_farewell{1000};
constexpr std::chrono::milliseconds launcher_grace{1000};

// The template with %H, %C and %% replaced. Throws UsageError on any other %.
std::string filled_template(const std::string& pattern, const std::string& host, const std::string& command) {
    std::string out;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] != '%') {
            out += pattern[i];
            continue;
        }
        const std::string next = pattern.substr(i + 1, 1);  // "" at the end
        if (next == "H") out += shell_quoted(host);
        else if (next == "C") out += command;
        else if (next == "%") out += '%';
        else
            throw UsageError(fmt::format("mpify: Placement::command '{}' has '%{}'; it may hold %H (the host), %C "
                                         "(the agent's command) and %% (a %)",
                                         pattern, next));
        ++i;
    }
    return out;
}

void check_placement(const Placement& placement, std::size_t remote_ranks) {
    if (placement.launcher != Placement::Launcher::command)
        throw UsageError("mpify: Options::placement names a launcher this version does not know");
    if (placement.command.find("%C") == std::string::npos)
        throw UsageError(fmt::format("mpify: Placement::command '{}' has no %C: the agent's command must go in it",
                                     placement.command));
    if (placement.ranks_per_host < 1)
        throw UsageError(fmt::format("mpify: Placement::ranks_per_host is {}; it must be at least 1",
                                     placement.ranks_per_host));
    const auto per_host = static_cast<std::size_t>(placement.ranks_per_host);
    const std::size_t hosts_needed = (remote_ranks + per_host - 1) / per_host;
    if (placement.hosts.size() < hosts_needed)
        throw UsageError(fmt::format("mpify: {} ranks run on other machines, {} per host, so Placement::hosts needs {} "
                                     "hosts; it has {}",
                                     remote_ranks, placement.ranks_per_host, hosts_needed, placement.hosts.size()));
}

}  // namespace

// A launcher process: /bin/sh running the placement's command for one rank.
struct RemoteRanks::Launched {
    int rank = -1;
    std::string host;
    std::string command;   // what /bin/sh ran: in errors and the debug log
    ChildProcess process;
    UniqueFd output;       // its stdout and stderr
    std::string tail;      // the last of what it wrote
    bool reaped = false;
    siginfo_t end{};

    // Takes what its output holds now (non-blocking), keeping the tail.
    void read_output() {
        if (!output) return;
        const DrainEnd end = drain_available(output.get(), [this](std::string_view piece) {
            tail.append(piece.data(), piece.size());
            if (tail.size() > launcher_tail_bytes) tail.erase(0, tail.size() - launcher_tail_bytes);
            return true;
        });
        if (end == DrainEnd::closed) output.reset();
    }
};

struct RemoteRanks::Rank {
    UniqueFd link;
    std::string host;
};

RemoteRanks::RemoteRanks(const Placement& placement, const std::vector<int>& ranks, int world_size,
                         std::optional<Clock::time_point> call_deadline, InterruptSignal interrupt)
    : secret_(CallSecret::fresh()) {
    check_placement(placement, ranks.size());
    started_at_ = Clock::now();
    listener_.emplace(address_toward_hosts(placement.caller_address, placement.hosts), placement.port);
    local_worker_program_ = find_mpify_worker();
    worker_program_ = placement.worker_program.empty() ? local_worker_program_ : placement.worker_program;
    const Clock::time_point deadline = sooner(call_deadline, Clock::now() + placement.start_timeout).value();
    try {
        for (std::size_t i = 0; i < ranks.size(); ++i)
            launch(placement, ranks[i], placement.hosts[i / static_cast<std::size_t>(placement.ranks_per_host)]);
        debug_line(fmt::format("remote ranks: {} launchers started {}", ranks.size(), since_start()));
        admit(world_size, deadline, interrupt);
        debug_line(fmt::format("remote ranks: every agent connected back and proved the secret {}", since_start()));
        for (auto& [rank, state] : ranks_) greet(state, deadline);
        debug_line(fmt::format("remote ranks: every agent said hello {}", since_start()));
    } catch (...) {
        stop_launchers(std::chrono::milliseconds(0));  // the destructor does not run
        throw;
    }
    listener_.reset();  // every agent is in: strangers now find no port
}

void RemoteRanks::launch(const Placement& placement, int rank, const std::string& host) {
    const std::string agent =
        fmt::format("env {} {} {}",
                    shell_quoted(fmt::format("{}=tcp:{}:{}", connect_env_var, listener_->address(), listener_->port())),
                    shell_quoted(fmt::format("{}={}", connect_rank_env_var, rank)), shell_quoted(worker_program_));
    auto launched = std::make_unique<Launched>();
    launched->rank = rank;
    launched->host = host;
    launched->command = filled_template(placement.command, host, agent);
    debug_line(fmt::format("rank {} on {}: launcher: {}", rank, host, launched->command));
    Pipe secret_in = make_pipe();
    Pipe output = make_pipe();
    LaunchSpec spec = shell_command(launched->command, output.write_end.get());
    spec.stdin_fd = secret_in.read_end.get();
    launched->process = spawn_by_exec(spec);
    launched->output = std::move(output.read_end);
    set_blocking(launched->output.get(), false);
    // The secret as the first line of its stdin: 65 bytes, which any pipe takes at once.
    const std::string line = secret_.hex() + "\n";
    try {
        write_all(secret_in.write_end.get(), line.data(), line.size(), "mpify: the launcher's stdin");
    } catch (const std::system_error&) {
        // It ended without reading: admission finds it gone and says so with its output.
    }
    launched_.push_back(std::move(launched));
}

void RemoteRanks::admit(int world_size, Clock::time_point deadline, const InterruptSignal& interrupt) {
    std::vector<bool> wanted(static_cast<std::size_t>(world_size), false);
    for (const auto& launched : launched_) wanted[static_cast<std::size_t>(launched->rank)] = true;
    while (ranks_.size() < launched_.size()) {
        // A launcher that ends before its agent is in, and an interrupt, end the admission.
        std::vector<int> watched{interrupt.fd};
        for (const auto& launched : launched_)
            if (ranks_.count(launched->rank) == 0) watched.push_back(launched->process.pidfd.get());
        for (auto& [rank, link] : listener_->admit(secret_, world_size, wanted, deadline, std::chrono::seconds(5),
                                                   watched, interrupt.check)) {
            wanted[static_cast<std::size_t>(rank)] = false;
            ranks_[rank].link = std::move(link);
        }
        if (interrupt.check && interrupt.check())
            throw Interrupted("mpify: interrupted while the remote ranks were starting; every launcher was stopped");
        for (auto& launched : launched_) {
            launched->read_output();
            if (ranks_.count(launched->rank) != 0) continue;
            pollfd ended{launched->process.pidfd.get(), POLLIN, 0};
            if (::poll(&ended, 1, 0) != 1) continue;
            launched->reaped = wait_for_child(launched->process.pid, &launched->end);
            launched->read_output();
            launcher_failed(*launched, "ended before its agent connected back");
        }
        if (ranks_.size() < launched_.size() && Clock::now() >= deadline) {
            const auto missing = std::find_if(launched_.begin(), launched_.end(),
                                              [&](const auto& l) { return ranks_.count(l->rank) == 0; });
            launcher_failed(**missing, "started, but its agent did not connect back in time");
        }
    }
}

void RemoteRanks::greet(Rank& rank, Clock::time_point deadline) {
    const LinkMessage hello = receive_link_message(rank.link.get(), deadline, "a remote rank's hello");
    if (hello.type != LinkType::hello) throw SpawnError("mpify: a remote rank's agent did not begin with hello");
    const AgentHello said = decode_hello(hello.payload);
    rank.host = said.host;
    if (said.mpify_version != MPIFY_VERSION_STRING)
        throw SpawnError(fmt::format("mpify: the agent on {} runs mpify {}, this caller mpify {}: install the same "
                                     "mpify on every machine",
                                     said.host, said.mpify_version, MPIFY_VERSION_STRING));
    if (said.torch_version != MPIFY_TORCH_VERSION_STRING)
        throw SpawnError(
            fmt::format("mpify: the agent on {} runs an mpify built with LibTorch {}, this caller's is "
                        "built with LibTorch {}: install the same LibTorch, and mpify built against it, on "
                        "every machine",
                        said.host, said.torch_version.empty() ? "?" : said.torch_version, MPIFY_TORCH_VERSION_STRING));
}

StartedWorker RemoteRanks::start(int rank, const std::map<std::string, std::string>& variables, Relay relay,
                                 std::optional<Clock::time_point> deadline) {
    Rank& state = ranks_.at(rank);
    const auto answer_by = sooner(deadline, Clock::now() + std::chrono::seconds(30)).value();
    std::string why;
    try {
        send_link_message(state.link.get(), LinkType::start, encode_start(variables));
        const LinkMessage answer = receive_link_message(state.link.get(), answer_by, "the remote worker's start");
        if (answer.type == LinkType::refused) why = answer.payload;
        else if (answer.type != LinkType::started) why = "its agent answered the start with something else";
    } catch (const std::exception& e) {
        why = e.what();
    }
    if (!why.empty()) throw SpawnError(fmt::format("mpify: rank {} cannot start on {}: {}", rank, state.host, why));
    WorkerHost stand_in;
    stand_in.executable = local_worker_program_;
    stand_in.argv = {"mpify-worker", fmt::format("(stand-in of rank {}@{})", rank, state.host)};
    // The call's variables hold for the stand-in too (a sanitizer's options, say), but it
    // is no worker: it is marked as the stand-in it is.
    std::map<std::string, std::string> marked = variables;
    marked.erase(worker_env_var);
    marked[stand_in_env_var] = fmt::format("{}@{}", rank, state.host);
    int control[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, control) != 0)
        throw SpawnError(fmt::format("mpify: cannot create the control socket of rank {}'s stand-in: {}", rank,
                                     std::strerror(errno)));
    UniqueFd callers_end(control[0]), stand_ins_end(control[1]);
    StartedWorker started = start_worker(Spawner::exec, stand_in, relay, environment_with(marked), state.link.get(),
                                         deadline, stand_ins_end.get());
    started.control = std::move(callers_end);
    state.link.reset();  // the stand-in holds it now
    debug_line(fmt::format("rank {} on {}: worker and stand-in started {}", rank, state.host, since_start()));
    return started;
}

std::string RemoteRanks::library_path(int rank, const std::string& path, std::optional<Clock::time_point> deadline) {
    Rank& state = ranks_.at(rank);
    std::string why;
    try {
        const Clock::time_point began = Clock::now();
        const LibraryOffer offer = offer_library(path);
        // Time to answer, and to receive the bytes at 1 MiB/s at least.
        const auto answer_by =
            sooner(deadline, Clock::now() + std::chrono::seconds(30) + std::chrono::seconds(offer.size >> 20)).value();
        const LibraryDelivery delivery = deliver_library(state.link.get(), offer, answer_by);
        const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count();
        const char* how = delivery.here.how == LibraryHere::at_its_path ? "found at its path"
                          : delivery.here.how == LibraryHere::in_cache  ? "found in the machine's cache"
                                                                        : "shipped";
        debug_line(fmt::format("rank {} on {}: {} {} ({} bytes sent, {} ms): {}", rank, state.host, path, how,
                               delivery.bytes_sent, took, delivery.here.path));
        return delivery.here.path;
    } catch (const std::exception& e) {
        why = e.what();
    }
    throw SpawnError(fmt::format("mpify: rank {} cannot have the function's library {} on {}: {}", rank, path,
                                 state.host, why));
}

const std::string& RemoteRanks::host(int rank) const { return ranks_.at(rank).host; }

std::string RemoteRanks::since_start() const {
    return fmt::format("at +{} ms",
                       std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_at_).count());
}

void RemoteRanks::launcher_failed(const Launched& launched, const std::string& what) {
    const std::string how = launched.reaped ? " (" + how_it_ended(launched.end) + ")" : "";
    std::string text = fmt::format("mpify: the launcher of rank {} on {} {}{}: {}", launched.rank, launched.host, what,
                                   how, launched.command);
    if (!launched.tail.empty()) text += "\nits last output:\n" + launched.tail;
    const auto& refused = listener_->refusals();
    if (!refused.empty())
        text += fmt::format("\nconnections refused on the caller's port: {} (the latest: {})",
                            listener_->refused_count(), refused.back());
    throw SpawnError(text);
}

RemoteRanks::~RemoteRanks() {
    stop_launchers(launcher_farewell);
    debug_line(fmt::format("remote ranks: every launcher ended {}", since_start()));
}

void RemoteRanks::stop_launchers(std::chrono::milliseconds farewell) noexcept {
    // When the call went well, their agents have ended (the call's supervisor reaped every
    // stand-in) and the launchers end by themselves within `farewell`; whatever is left
    // is stopped, with what it started (its process group).
    const Clock::time_point farewell_ends = Clock::now() + farewell;
    for (auto& launched : launched_) {
        if (launched->reaped) continue;
        pollfd ended{launched->process.pidfd.get(), POLLIN, 0};
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(farewell_ends - Clock::now());
        if (::poll(&ended, 1, static_cast<int>(std::max<long long>(0, left.count()))) != 1) {
            ::kill(-launched->process.pid, SIGTERM);
            (void)::poll(&ended, 1, static_cast<int>(launcher_grace.count()));
        }
        ::kill(-launched->process.pid, SIGKILL);  // what the launcher started and left behind
        launched->reaped = wait_for_child(launched->process.pid, &launched->end);
    }
}

MPIFY_END_DETAIL_NAMESPACE
