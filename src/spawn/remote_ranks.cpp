#include "spawn/remote_ranks.hpp"

#include "common/debug_log.hpp"
#include "common/endpoint.hpp"
#include "common/load_time_environment.hpp"
#include "common/environment_list.hpp"
#include "common/poll_set.hpp"
#include "common/posix.hpp"
#include "common/shell_quoted.hpp"
#include "contract/process_contract.hpp"
#include "contract/remote_link.hpp"
#include "spawn/command_output.hpp"
#include "spawn/exec_spawner.hpp"
#include "spawn/launcher_process.hpp"
#include "spawn/launchers/launcher.hpp"
#include "spawn/library_shipping.hpp"
#include "spawn/node_templates.hpp"
#include "spawn/template_client.hpp"
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

// How long launchers have to end by themselves once the call is over, before SIGTERM.
constexpr std::chrono::milliseconds launcher_farewell{1000};
// How long a dismissed agent may take to answer: its node template loads the library
// first (the template's own limit for that), and the link adds little.
constexpr std::chrono::seconds dismissal_patience = WarmTemplate::fork_answer_limit + std::chrono::seconds(10);

}  // namespace

// How a rank's agent was started: by a launcher of its own, or by its host's node template.
struct RemoteRanks::Launched {
    int rank = -1;
    std::string host;
    LauncherProcess* launcher = nullptr;    // its own, or its node template's
    std::unique_ptr<LauncherProcess> own;   // a launcher for this rank of this call
    std::shared_ptr<NodeTemplate> node;     // or the node template asked for its agent
    std::string node_command;               // that template's launcher command
};

struct RemoteRanks::Rank {
    UniqueFd link;
    std::string host;
    bool start_asked = false;
    std::string start_failure;  // why asking its agent to start the worker failed
};

RemoteRanks::RemoteRanks(const Placement& placement, const std::vector<PlacedRank>& ranks, int world_size,
                         std::optional<Clock::time_point> call_deadline, InterruptSignal interrupt,
                         const std::map<std::string, std::string>& call_variables)
    : secret_(CallSecret::fresh()) {
    started_at_ = Clock::now();
    listener_.emplace(address_toward_hosts(placement.caller_address, placement.hosts), placement.port);
    endpoint_ = fmt::format("tcp:{}:{}", listener_->address(), listener_->port());
    local_worker_program_ = find_mpify_worker();
    worker_program_ = placement.worker_program.empty() ? local_worker_program_ : placement.worker_program;
    if (uses_node_templates(placement)) {
        // The template loads the libraries its workers use: with their load-time variables.
        node_template_program_ = fmt::format(
            "env {}", shell_quoted(fmt::format("{}={}", node_template_env_var, placement.template_idle.count())));
        for (const auto& [name, value] : call_variables)
            if (read_at_load(name + "=")) node_template_program_ += " " + shell_quoted(name + "=" + value);
        node_template_program_ += " " + shell_quoted(worker_program_);
    }
    const Clock::time_point deadline = sooner(call_deadline, Clock::now() + placement.start_timeout).value();
    try {
        for (const PlacedRank& placed : ranks) launch(placement, placed.rank, placed.host);
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
    auto launched = std::make_unique<Launched>();
    launched->rank = rank;
    launched->host = host;
    if (!node_template_program_.empty()) {
        launched->node_command = launch_command(placement, host, node_template_program_);
        ask_node_template(*launched);
        launched_.push_back(std::move(launched));
        return;
    }
    const std::string agent =
        fmt::format("env {} {} {}", shell_quoted(fmt::format("{}={}", connect_env_var, endpoint_)),
                    shell_quoted(fmt::format("{}={}", connect_rank_env_var, rank)), shell_quoted(worker_program_));
    const std::string command = launch_command(placement, host, agent);
    debug_line(fmt::format("rank {} on {}: launcher: {}", rank, host, command));
    Pipe secret_in = make_pipe();
    launched->own = start_launcher(command, secret_in.read_end.get());
    launched->launcher = launched->own.get();
    // The secret as the first line of its stdin: 65 bytes, which any pipe takes at once.
    const std::string line = secret_.hex() + "\n";
    try {
        write_all(secret_in.write_end.get(), line.data(), line.size(), "mpify: the launcher's stdin");
    } catch (const std::system_error&) {
        // It ended without reading: admission finds it gone and says so with its output.
    }
    launched_.push_back(std::move(launched));
}

void RemoteRanks::ask_node_template(Launched& launched) {
    for (int attempt = 0; attempt < 2; ++attempt) {
        launched.node = node_template(launched.node_command);
        launched.launcher = launched.node->launcher.get();
        // What it said in earlier calls is not this call's: with a fixed Placement::port, an
        // old agent's failure would read as one of this call's.
        if (heard_from_.insert(launched.launcher).second) {
            launched.launcher->read_output();
            launched.launcher->tail.clear();
        }
        if (ask_for_agent(*launched.node, {launched.rank, endpoint_, secret_.hex()})) {
            debug_line(fmt::format("rank {} on {}: agent asked of the node template: {}", launched.rank, launched.host,
                                   launched.node_command));
            return;
        }
        discard_node_template(launched.node_command);  // it ended, or reads nothing: a new one
    }
    if (!launched.launcher->ended()) launcher_failed(launched, "took no request on its stdin");
    launched.launcher->reap();
    launcher_failed(launched, "ended before its agent connected back");
}

void RemoteRanks::admit(int world_size, Clock::time_point deadline, const InterruptSignal& interrupt) {
    std::vector<bool> wanted(static_cast<std::size_t>(world_size), false);
    for (const auto& launched : launched_) wanted[static_cast<std::size_t>(launched->rank)] = true;
    while (ranks_.size() < launched_.size()) {
        // A launcher that ends before its agent is in, and an interrupt, end the admission.
        // A node template says when an agent it forked failed: its output is watched too.
        std::vector<int> watched{interrupt.fd};
        for (const auto& launched : launched_) {
            if (ranks_.count(launched->rank) != 0) continue;
            watched.push_back(launched->launcher->process.pidfd.get());
            if (launched->node && launched->launcher->output) watched.push_back(launched->launcher->output.get());
        }
        for (auto& [rank, link] : listener_->admit(secret_, world_size, wanted, deadline, std::chrono::seconds(5),
                                                   watched, interrupt.check)) {
            wanted[static_cast<std::size_t>(rank)] = false;
            ranks_[rank].link = std::move(link);
        }
        if (interrupt.check && interrupt.check())
            throw Interrupted("mpify: interrupted while the remote ranks were starting; every launcher was stopped");
        for (auto& launched : launched_) {
            launched->launcher->read_output();
            if (ranks_.count(launched->rank) != 0) continue;
            if (launched->node &&
                launched->launcher->tail.find(agent_failure_notice(launched->rank, endpoint_)) != std::string::npos)
                launcher_failed(*launched, "saw its agent end before it connected back");
            if (!launched->launcher->ended()) continue;
            launched->launcher->reap();
            // A template may end just as it is asked (idle, or retiring): once, a new one.
            if (launched->node && renewed_.insert(launched->node_command).second) {
                discard_node_template(launched->node_command);
                for (auto& other : launched_)
                    if (other->node_command == launched->node_command && ranks_.count(other->rank) == 0)
                        ask_node_template(*other);
                continue;
            }
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

void RemoteRanks::ask_to_start(int rank, const std::map<std::string, std::string>& variables) {
    Rank& state = ranks_.at(rank);
    state.start_asked = true;
    try {
        send_link_message(state.link.get(), LinkType::start, encode_start(variables));
    } catch (const std::exception& e) {
        state.start_failure = e.what();  // start() says it, with the rank and its host
    }
}

StartedWorker RemoteRanks::start(int rank, const std::map<std::string, std::string>& variables, Relay relay,
                                 std::optional<Clock::time_point> deadline) {
    Rank& state = ranks_.at(rank);
    if (!state.start_asked) ask_to_start(rank, variables);
    const auto answer_by = sooner(deadline, Clock::now() + std::chrono::seconds(30)).value();
    std::string why = state.start_failure;
    try {
        if (why.empty()) {
            const LinkMessage answer = receive_link_message(state.link.get(), answer_by, "the remote worker's start");
            if (answer.type == LinkType::refused) why = answer.payload;
            else if (answer.type != LinkType::started) why = "its agent answered the start with something else";
            else
                debug_line(fmt::format("rank {} on {}: its worker was {} {}", rank, state.host,
                                       decode_started(answer.payload).how, since_start()));
        }
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
        debug_line(fmt::format("rank {} on {}: {} {} ({} bytes sent, {} ms): {} {}", rank, state.host, path, how,
                               delivery.bytes_sent, took, delivery.here.path, since_start()));
        return delivery.here.path;
    } catch (const std::exception& e) {
        why = e.what();
    }
    throw SpawnError(fmt::format("mpify: rank {} cannot have the function's library {} on {}: {}", rank, path,
                                 state.host, why));
}

void RemoteRanks::dismiss(int rank) {
    Rank& state = ranks_.at(rank);
    try {
        send_link_message(state.link.get(), LinkType::dismiss, {});
    } catch (const std::exception& e) {
        throw SpawnError(fmt::format("mpify: rank {} on {}: its agent could not be dismissed: {}", rank, state.host,
                                     e.what()));
    }
}

std::string RemoteRanks::await_dismissal(int rank, std::optional<Clock::time_point> deadline) {
    Rank& state = ranks_.at(rank);
    try {
        for (;;) {
            const LinkMessage answer = receive_link_message(state.link.get(),
                                                            sooner(deadline, Clock::now() + dismissal_patience).value(),
                                                            "a dismissed agent's answer");
            if (answer.type == LinkType::dismissed) return answer.payload;
            if (answer.type != LinkType::alive)
                throw std::runtime_error(fmt::format("its agent answered the dismissal with type {}",
                                                     static_cast<int>(answer.type)));
        }
    } catch (const std::runtime_error& e) {
        throw SpawnError(fmt::format("mpify: rank {} on {}: {}", rank, state.host, e.what()));
    }
}

const std::string& RemoteRanks::host(int rank) const { return ranks_.at(rank).host; }

std::string RemoteRanks::since_start() const {
    return fmt::format("at +{} ms",
                       std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_at_).count());
}

void RemoteRanks::launcher_failed(const Launched& launched, const std::string& what) {
    const LauncherProcess& launcher = *launched.launcher;
    const std::string how = launcher.reaped ? " (" + how_it_ended(launcher.end) + ")" : "";
    const char* whose = launched.node ? "the node template for" : "the launcher of";
    std::string text = fmt::format("mpify: {} rank {} on {} {}{}: {}", whose, launched.rank, launched.host, what, how,
                                   launcher.command);
    if (!launcher.tail.empty()) text += "\nits last output:\n" + launcher.tail;
    const auto& refused = listener_->refusals();
    if (!refused.empty())
        text += fmt::format("\nconnections refused on the caller's port: {} (the latest: {})",
                            listener_->refused_count(), refused.back());
    if (launched.node) discard_node_template(launched.node_command);  // the next call starts a new one
    throw SpawnError(text);
}

RemoteRanks::~RemoteRanks() {
    stop_launchers(launcher_farewell);
    debug_line(fmt::format("remote ranks: every launcher ended {}", since_start()));
}

void RemoteRanks::stop_launchers(std::chrono::milliseconds farewell) noexcept {
    // When the call went well, their agents have ended (the call's supervisor reaped every
    // stand-in) and the launchers end by themselves within `farewell`; whatever is left
    // is stopped, with what it started (its process group). Node templates stay.
    const Clock::time_point farewell_ends = Clock::now() + farewell;
    for (auto& launched : launched_)
        if (launched->own)
            launched->own->stop(std::chrono::duration_cast<std::chrono::milliseconds>(farewell_ends - Clock::now()));
}

MPIFY_END_DETAIL_NAMESPACE
