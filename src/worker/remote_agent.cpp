#include "worker/remote_agent.hpp"

#include "common/environment_list.hpp"
#include "common/poll_set.hpp"
#include "common/posix.hpp"
#include "contract/process_contract.hpp"
#include "contract/remote_link.hpp"
#include "forensics/stack_collector.hpp"
#include "contract/template_protocol.hpp"
#include "spawn/start_worker.hpp"
#include "spawn/template_client.hpp"
#include "worker/shipped_library.hpp"

#include <mpify/abi.hpp>
#include <mpify/version.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <optional>
#include <fmt/format.h>
#include <stdexcept>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// How long the caller has to say how to start the worker once the agent said hello.
constexpr std::chrono::seconds start_patience{30};
// Output and channel bytes queued for the link beyond which the worker's pipes wait.
constexpr std::size_t most_queued = std::size_t(8) << 20;
// How long the worker's last output and its end may take to leave once it has ended.
constexpr std::chrono::seconds farewell_patience{10};
// How long reading the worker's stacks may take here, out of the caller's limit.
constexpr std::chrono::milliseconds agent_stack_limit = stack_collection_limit * 3 / 4;

[[noreturn]] void link_failed(const std::string& caller, int rank, const std::string& why) {
    std::fprintf(stderr, "mpify agent (rank %d): the link to its caller at %s failed: %s\n", rank, caller.c_str(),
                 why.c_str());
    std::fflush(stderr);
    ::_exit(70);
}

// One remote rank's relay between its worker and the link. The worker is this process's
// child, or the node template's (`node_template` open): then the template reaps it and
// says how it ended.
class Agent {
public:
    Agent(UniqueFd link, StartedWorker worker, UniqueFd node_template)
        : link_(std::move(link)), worker_(std::move(worker)), node_template_(std::move(node_template)) {
        for (const UniqueFd* fd : {&link_, &worker_.channel, &worker_.out, &worker_.err})
            if (*fd) set_blocking(fd->get(), false);
    }

    // Relays until the worker has ended and its end is told, or the link is gone. Returns
    // why the link failed, or "" when all went well.
    std::string run() {
        while (!ended_) {
            if (const std::string failure = relay_once(); !failure.empty()) {
                // The template reaps its own: killing it is all there is to do here.
                if (node_template_) signal_child_and_group(worker_.process.pidfd.get(), worker_.process.pid, SIGKILL);
                else kill_and_reap(worker_.process.pid, worker_.process.pidfd.get());
                return failure;
            }
        }
        return say_farewell();
    }

private:
    std::string relay_once() {
        const bool room = to_link_.size() < most_queued;
        PollSet& fds = poll_set_;
        fds.clear();
        fds.add(link_.get(), POLLIN | (to_link_.empty() ? 0 : POLLOUT));
        fds.add(node_template_ ? node_template_.get() : worker_.process.pidfd.get(), POLLIN);
        fds.add(worker_.channel ? worker_.channel.get() : -1,
                (room ? POLLIN : 0) | (to_channel_.empty() ? 0 : POLLOUT));
        fds.add(worker_.out && room ? worker_.out.get() : -1, POLLIN);
        fds.add(worker_.err && room ? worker_.err.get() : -1, POLLIN);
        fds.wait(heartbeat_.wake_at());

        if (fds.revents(0) & (POLLIN | POLLHUP | POLLERR))
            if (std::string failure = read_link(); !failure.empty()) return failure;
        // A worker gone drops what waited for it: its end tells what happened.
        if (fds.revents(2) & POLLOUT) to_channel_.flush(worker_.channel.get());
        if (fds.revents(2) & (POLLIN | POLLHUP | POLLERR)) forward(worker_.channel, LinkType::channel);
        if (fds.revents(3)) forward(worker_.out, LinkType::out);
        if (fds.revents(4)) forward(worker_.err, LinkType::err);
        if (fds.revents(1)) {
            if (!node_template_) reap();
            else if (std::string failure = hear_template(); !failure.empty()) return failure;
        }

        const Clock::time_point now = Clock::now();
        if (heartbeat_.silent(now))
            return fmt::format("nothing came from the caller for {} s", link_silence_limit.count() / 1000);
        heartbeat_.beat(to_link_, now);
        if (!to_link_.flush(link_.get())) return "the caller closed the connection";
        return {};
    }

    std::string read_link() {
        try {
            if (!reader_.read_available(link_.get(), [this](LinkMessage& message) { take(message); }))
                return "the caller closed the connection";
        } catch (const std::exception& e) {
            return e.what();
        }
        heartbeat_.heard(Clock::now());
        return {};
    }

    void take(LinkMessage& message) {
        switch (message.type) {
            case LinkType::channel: to_channel_.append(message.payload); break;
            case LinkType::signal: {
                const auto signal = decode_number(message.payload, "a signal for the worker");
                if (signal > 0 && signal < NSIG && !reaped_)
                    signal_child_and_group(worker_.process.pidfd.get(), worker_.process.pid, static_cast<int>(signal));
                break;
            }
            case LinkType::alive: break;
            case LinkType::stacks_wanted: answer_where(); break;
            default:
                throw std::runtime_error(fmt::format("the caller sent a message of type {} mid-call",
                                                     static_cast<int>(message.type)));
        }
    }

    // Reads where the worker is, here, within a part of the caller's limit (the rest is
    // for the way back), and sends it as a stack dump. The relay waits meanwhile.
    void answer_where() {
        to_link_.push(LinkType::stacks,
                      worker_stack_dump(worker_.process.pid, reaped_, agent_stack_limit, max_link_payload));
        heartbeat_.heard(Clock::now());  // the caller's beats waited in the socket meanwhile
    }

    // Moves what `fd` holds now to the link as `type` messages; closes it at its end.
    // Stops once the link's queue is full, unless the worker has ended (then it reads on).
    void forward(UniqueFd& fd, LinkType type) {
        if (!fd) return;
        const DrainEnd end = drain_available(fd.get(), [&](std::string_view piece) {
            to_link_.push(type, piece);
            return reaped_ || to_link_.size() < most_queued;
        });
        if (end == DrainEnd::closed) fd.reset();
    }

    void reap() {
        siginfo_t info{};
        // The worker has ended (its pidfd said so): what it started goes with it.
        signal_child_and_group(-1, worker_.process.pid, SIGKILL);
        if (!wait_for_child(worker_.process.pid, &info)) info.si_code = CLD_KILLED, info.si_status = SIGKILL;
        tell_end(info.si_code, info.si_status);
    }

    // The node template says its worker ended (and was reaped). Or it is gone itself, and
    // its workers with it (PDEATHSIG): then so is the rank, and so is this agent (its
    // PDEATHSIG comes next); returns why.
    std::string hear_template() {
        int code = 0, status = 0;
        try {
            const TemplateReply said = receive_reply(node_template_.get());
            if (said.status != TemplateStatus::worker_ended || said.pid != worker_.process.pid) return {};
            std::tie(code, status) = decode_worker_end(said.message);
        } catch (const std::exception& e) {
            return fmt::format("the node's template ended ({}), and the worker with it", e.what());
        }
        node_template_.reset();
        tell_end(code, status);
        return {};
    }

    void tell_end(int code, int status) {
        reaped_ = true;
        // What the worker wrote before it ended is in its pipes: all of it goes first.
        forward(worker_.channel, LinkType::channel);
        forward(worker_.out, LinkType::out);
        forward(worker_.err, LinkType::err);
        to_link_.push(LinkType::exited, encode_end({code == CLD_EXITED, status}));
        ended_ = true;
    }

    std::string say_farewell() {
        const Clock::time_point deadline = Clock::now() + farewell_patience;
        PollSet fds;
        while (!to_link_.empty()) {
            fds.clear();
            fds.add(link_.get(), POLLOUT);
            if (fds.wait(deadline) == 0 && Clock::now() >= deadline) return "the caller took no more bytes";
            if (!to_link_.flush(link_.get())) return "the caller closed the connection";
        }
        return {};
    }

    UniqueFd link_;
    StartedWorker worker_;
    UniqueFd node_template_;
    LinkReader reader_;
    LinkQueue to_link_;
    OutgoingBytes to_channel_;
    PollSet poll_set_;
    LinkHeartbeat heartbeat_;
    bool reaped_ = false, ended_ = false;
};

// The call's library on this machine: where it is, and, where that is a copy (shipped, or
// in the cache), its path on the caller's machine.
struct PlacedLibrary {
    std::string path, origin;
};

// A request of this agent's to the node's template that names `library`.
ForkRequest request_naming(const PlacedLibrary& library) {
    ForkRequest request;
    request.caller = ::getpid();
    request.library = library.path;
    request.library_origin = library.origin;
    return request;
}

// Sends `request` (with `fds`) to the node's template and returns its answer, with the fds
// it carries in `received`; nullopt when none comes within the template's limit. Throws
// what the socket throws when the template is gone.
std::optional<TemplateReply> ask_node_template(int node_template, const ForkRequest& request,
                                               const std::vector<int>& fds, std::vector<UniqueFd>* received = nullptr) {
    send_fork_request(node_template, request, fds);
    PollSet ready;
    ready.add(node_template, POLLIN);
    if (ready.wait(Clock::now() + WarmTemplate::fork_answer_limit) == 0) return std::nullopt;
    return receive_reply(node_template, received);
}

// What a template that did not answer in time is said to have done.
std::string no_answer_in_time() {
    return fmt::format("it did not answer within {} s", WarmTemplate::fork_answer_limit.count());
}

// Has the node's template fork the worker of `spec`, after loading `library` (the
// function's, where this node has it); `note` gets what it said of the fork. Throws
// std::runtime_error saying why not.
ChildProcess fork_from_node_template(int node_template, const LaunchSpec& spec, const PlacedLibrary& library,
                                     std::string& note) {
    ForkRequest request = request_naming(library);
    request.env = spec.env;
    std::vector<int> fds{spec.channel_fd, spec.stdout_fd, spec.stderr_fd};
    if (spec.args_fd >= 0) fds.push_back(spec.args_fd);
    std::vector<UniqueFd> pidfd;
    const std::optional<TemplateReply> answer = ask_node_template(node_template, request, fds, &pidfd);
    if (!answer) throw std::runtime_error(no_answer_in_time());
    const TemplateReply& reply = *answer;
    if (reply.status != TemplateStatus::ok) throw std::runtime_error(reply.message);
    if (pidfd.size() != 1) throw std::runtime_error("its answer came without the worker's pidfd");
    note = reply.message;
    ChildProcess worker;
    worker.pid = static_cast<pid_t>(reply.pid);
    worker.pidfd = std::move(pidfd.front());
    return worker;
}

// Has the node's template load `library` now, while the caller places it on other nodes
// (a request without fds: it answers nothing). A template gone is found at the fork.
void ask_to_preload(const UniqueFd& node_template, const PlacedLibrary& library) {
    try {
        send_fork_request(node_template.get(), request_naming(library), {});
    } catch (const std::system_error&) {
    }
}

// Has the node's template load `library` and waits until it has: "" once it has, else why
// not (mpify::warm_nodes wants the load done before its call returns).
std::string loaded_by_node_template(int node_template, const PlacedLibrary& library) {
    ForkRequest request = request_naming(library);
    request.answer_load = true;
    try {
        const std::optional<TemplateReply> reply = ask_node_template(node_template, request, {});
        if (!reply) return no_answer_in_time();
        return reply->status == TemplateStatus::ok ? std::string() : reply->message;
    } catch (const std::exception& e) {
        return fmt::format("it is gone ({})", e.what());
    }
}

// Says hello, places the call's libraries, takes the call's variables and starts the
// worker with them: forked by the node's template when this agent has one (it is closed
// when the template could not), else exec'd. Nullopt when the caller dismissed the agent
// instead (mpify::warm_nodes: the libraries were all it came for).
std::optional<StartedWorker> start_rank_worker(int link, int rank, UniqueFd& node_template) {
    send_link_message(link, LinkType::hello,
                      encode_hello({MPIFY_VERSION_STRING, this_host_name(), ::getpid(), MPIFY_TORCH_VERSION_STRING}));
    // Before the start come the call's libraries, each found here or received.
    PlacedLibrary library;
    LinkMessage start = receive_link_message(link, Clock::now() + start_patience, "the caller's start");
    while (start.type == LinkType::library) {
        const LibraryOffer offer = decode_offer(start.payload);
        library.path = answer_library_offer(link, offer, start_patience);
        library.origin = library.path == offer.path ? std::string() : offer.path;
        if (node_template) ask_to_preload(node_template, library);
        start = receive_link_message(link, Clock::now() + start_patience, "the caller's start");
    }
    if (start.type == LinkType::dismiss) {
        const bool loads = node_template && !library.path.empty();
        send_link_message(link, LinkType::dismissed,
                          loads ? loaded_by_node_template(node_template.get(), library) : "");
        return std::nullopt;
    }
    if (start.type != LinkType::start)
        throw std::runtime_error(fmt::format("the caller sent type {} instead of start", static_cast<int>(start.type)));
    std::map<std::string, std::string> variables = decode_start(start.payload);
    variables[worker_env_var] = std::to_string(worker_channel_fd);
    WorkerHost host;
    host.executable = "/proc/self/exe";  // this agent's own program: mpify-worker
    host.argv = {"mpify-worker", fmt::format("(rank {})", rank)};
    std::string how = "exec'd: this agent has no node template";
    if (node_template) {
        try {
            std::string note;  // what the template said of the fork
            const SpawnFunction from_template = [&](const LaunchSpec& spec) {
                return fork_from_node_template(node_template.get(), spec, library, note);
            };
            StartedWorker worker =
                start_worker_with(from_template, host, Relay::lines, environment_with(variables), -1, std::nullopt);
            const std::string forked = note.empty() ? "forked by the node template"
                                                    : fmt::format("forked by the node template ({})", note);
            send_link_message(link, LinkType::started, encode_started({worker.process.pid, forked}));
            return worker;
        } catch (const std::system_error& e) {  // the template is gone: exec, as without it
            how = fmt::format("exec'd: the node template is gone ({})", e.what());
        } catch (const std::runtime_error& e) {
            how = fmt::format("exec'd: the node template could not fork it ({})", e.what());
        }
        node_template.reset();
    }
    try {
        StartedWorker worker =
            start_worker(Spawner::exec, host, Relay::lines, environment_with(variables), -1, std::nullopt);
        send_link_message(link, LinkType::started, encode_started({worker.process.pid, how}));
        return worker;
    } catch (const std::exception& e) {
        send_link_message(link, LinkType::refused, e.what());  // the caller names this host itself
        throw;
    }
}

}  // namespace

void run_remote_agent(UniqueFd link, const std::string& caller, int rank, UniqueFd node_template) {
    // A caller gone mid-write must be an error to read, not a signal that ends the agent
    // before it has stopped the worker.
    ::signal(SIGPIPE, SIG_IGN);
    std::string failure;
    try {
        std::optional<StartedWorker> worker = start_rank_worker(link.get(), rank, node_template);
        if (worker) failure = Agent(std::move(link), std::move(*worker), std::move(node_template)).run();
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (!failure.empty()) link_failed(caller, rank, failure);
    std::fflush(nullptr);
    ::_exit(0);
}

MPIFY_END_DETAIL_NAMESPACE
