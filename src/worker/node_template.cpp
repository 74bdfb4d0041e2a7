#include "worker/node_template.hpp"

#include "common/environment_list.hpp"
#include "common/environment_number.hpp"
#include "common/load_time_environment.hpp"
#include "common/poll_set.hpp"
#include "common/posix.hpp"
#include "contract/node_template_request.hpp"
#include "contract/process_contract.hpp"
#include "contract/template_protocol.hpp"
#include "spawn/child_process.hpp"
#include "spawn/exec_spawner.hpp"
#include "worker/agent_forker.hpp"
#include "worker/connect_back_worker.hpp"
#include "worker/fork_for_parent.hpp"
#include "worker/forked_worker.hpp"

#include <mpify/error.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <list>
#include <memory>
#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// The fd at which a forked agent finds its socket to the template.
constexpr int agent_template_fd = 3;

// Spares kept at most: as many as the workers the template has had at once, up to this.
constexpr std::size_t most_spares = 16;

// What the template's ok reply says of a worker that was a spare (the agent passes it on).
constexpr const char* spare_note = "forked ahead of the call";

void say(const std::string& text) {
    std::fprintf(stderr, "mpify node template on %s: %s\n", this_host_name().c_str(), text.c_str());
    std::fflush(stderr);
}

class NodeTemplate {
public:
    explicit NodeTemplate(std::chrono::seconds idle_limit)
        : idle_limit_(idle_limit), signature_(load_time_signature(environment_with({}))),
          devnull_(open_dev_null(O_RDONLY)), last_busy_(Clock::now()) {
        ::prctl(PR_GET_NAME, worker_name_);
        ::prctl(PR_SET_NAME, "mpify-node-tmpl");
        set_blocking(STDIN_FILENO, false);
        // Now, while no library is loaded: the agents it forks map mpify alone.
        const pid_t template_pid = ::getpid();
        forker_ = AgentForker::start([this, template_pid](const AgentRequest& request, int socket) {
            const std::optional<CallSecret> secret = parse_secret(request.secret_hex);
            if (!secret) ::_exit(70);
            become_agent(request, *secret, socket, template_pid);
        });
    }

    [[noreturn]] void run() {
        for (;;) {
            PollSet fds;
            fds.add(STDIN_FILENO, POLLIN);
            for (const Agent& agent : agents_) {
                fds.add(agent.socket ? agent.socket.get() : -1, POLLIN);
                fds.add(agent.pidfd.get(), POLLIN);
            }
            for (const Worker& worker : workers_) fds.add(worker.pidfd.get(), POLLIN);
            const bool idle = agents_.empty() && workers_.empty();
            const std::chrono::seconds limit = retiring_ ? std::chrono::seconds(0) : idle_limit_;
            std::optional<Clock::time_point> idle_ends;
            if (idle && limit.count() > 0) idle_ends = last_busy_ + limit;
            if (idle && retiring_) idle_ends = Clock::now();
            // Spares are forked between calls (not to take the cores from a call's ranks),
            // one at a time while nothing waits: a look, then back here.
            const bool spare_wanted = idle && !retiring_ && spares_.size() < spares_wanted_;
            const int ready = fds.wait(spare_wanted ? std::optional<Clock::time_point>(Clock::now()) : idle_ends);
            if (spare_wanted && ready == 0) {
                fork_spare();
                continue;
            }

            // Those polled are first in their lists: what serving them adds comes after.
            std::size_t index = 1, agents_left = agents_.size(), workers_left = workers_.size();
            for (auto agent = agents_.begin(); agents_left > 0; --agents_left, index += 2) {
                if (fds.revents(index) != 0) serve_agent(*agent);
                if (fds.revents(index + 1) == 0) {
                    ++agent;
                    continue;
                }
                siginfo_t end{};
                if (wait_for_child(agent->pid, &end) && !(end.si_code == CLD_EXITED && end.si_status == 0))
                    say(agent_failure_notice(agent->request.rank, agent->request.endpoint));
                forget_agent(*agent);
                agent = agents_.erase(agent);
            }
            for (auto worker = workers_.begin(); workers_left > 0; --workers_left, ++index) {
                if (fds.revents(index) == 0) {
                    ++worker;
                    continue;
                }
                reap(*worker);
                worker = workers_.erase(worker);
            }
            if (fds.revents(0) != 0) read_requests();
            if (!agents_.empty() || !workers_.empty()) last_busy_ = Clock::now();
            else if (idle_ends && Clock::now() >= *idle_ends && !request_waiting()) ::_exit(0);
        }
    }

private:
    struct Agent {
        AgentRequest request;  // without its secret
        pid_t pid = -1;
        UniqueFd pidfd;
        UniqueFd socket;  // closed once the agent closed its end
    };
    struct Worker {
        pid_t pid = -1;
        UniqueFd pidfd;
        pid_t agent = -1;
    };
    // A worker forked ahead of its call, from this template as it was then: it waits on
    // its socket for a fork request, and becomes the worker that request asks for.
    struct Spare {
        pid_t pid = -1;
        UniqueFd pidfd;
        UniqueFd socket;
        std::size_t libraries = 0;  // loaded_library_count() when it was forked
    };

    bool request_waiting() const {
        pollfd input{STDIN_FILENO, POLLIN, 0};
        return ::poll(&input, 1, 0) == 1;
    }

    void read_requests() {
        char buffer[4096];
        for (;;) {
            const ssize_t n = retry_on_eintr([&] { return ::read(STDIN_FILENO, buffer, sizeof buffer); });
            if (n == 0) ::_exit(0);  // the caller ended, or ended this template: so do its agents, workers
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK) break;
                ::_exit(0);
            }
            pending_.append(buffer, static_cast<std::size_t>(n));
        }
        for (std::size_t end; (end = pending_.find('\n')) != std::string::npos;) {
            const std::string line = pending_.substr(0, end);
            pending_.erase(0, end + 1);
            if (const std::optional<AgentRequest> request = parse_agent_request(line)) start_agent(*request);
            else say("a line on its stdin is not a request; ignored");
        }
        if (pending_.size() > longest_agent_request) {
            say("a request longer than any request; dropped");
            pending_.clear();
        }
    }

    void start_agent(const AgentRequest& request) {
        last_busy_ = Clock::now();
        if (retiring_ || (!forker_ && thread_count() != 1)) {
            exec_agent(request);
            return;
        }
        const std::optional<CallSecret> secret = parse_secret(request.secret_hex);
        if (!secret) {
            say(fmt::format("the request for rank {} has no call's secret; ignored", request.rank));
            return;
        }
        int pair[2];
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
            exec_agent(request);
            return;
        }
        UniqueFd ours(pair[0]), its(pair[1]);
        pid_t pid = -1;
        if (forker_) {
            pid = forker_->fork_agent(request, its.get());
            if (pid < 0 && errno == EPIPE) {
                say("its agent forker is gone; it forks its agents itself");
                forker_.reset();
            }
        }
        if (!forker_) {
            if (thread_count() != 1) {
                exec_agent(request);
                return;
            }
            const pid_t parent = ::getpid();
            pid = ::fork();
            if (pid == 0) become_agent(request, *secret, its.get(), parent);
        }
        if (pid < 0) {
            say(fmt::format("cannot fork the agent of rank {}: {}", request.rank, std::strerror(errno)));
            return;
        }
        try {
            track_agent(request, adopt_child(pid), std::move(ours));
        } catch (const SpawnError& e) {  // killed and reaped: its call finds no agent
            say(fmt::format("the agent of rank {}: {}", request.rank, e.what()));
        }
    }

    // In the forked child: only the socket to the template, and the launcher's stdout and
    // stderr, stay; it dies with the template.
    [[noreturn]] void become_agent(const AgentRequest& request, const CallSecret& secret, int socket, pid_t parent) {
        if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(70);
        ::dup2(devnull_.get(), STDIN_FILENO);
        if (::dup2(socket, agent_template_fd) < 0) ::_exit(70);
        ::fcntl(agent_template_fd, F_SETFD, FD_CLOEXEC);
        close_fds_from(agent_template_fd + 1);
        ::prctl(PR_SET_NAME, "mpify-agent");
        join_caller_as_agent(request.endpoint, secret, request.rank, UniqueFd(agent_template_fd));
    }

    // An agent started as a launcher would start it: for a template that must not fork.
    void exec_agent(const AgentRequest& request) {
        LaunchSpec spec;
        spec.executable = "/proc/self/exe";
        spec.argv = {"mpify-worker", fmt::format("(agent of rank {})", request.rank)};
        spec.env = environment_with({{connect_env_var, request.endpoint},
                                     {connect_rank_env_var, std::to_string(request.rank)},
                                     {connect_secret_env_var, request.secret_hex}});
        try {
            track_agent(request, spawn_by_exec(spec), UniqueFd());
        } catch (const std::exception& e) {
            say(fmt::format("cannot start the agent of rank {}: {}", request.rank, e.what()));
        }
    }

    // An agent to reap, whose failure to say, and (a forked one) to serve on `socket`.
    void track_agent(const AgentRequest& request, ChildProcess process, UniqueFd socket) {
        Agent agent;
        agent.request = {request.rank, request.endpoint, {}};
        agent.pid = process.pid;
        agent.pidfd = std::move(process.pidfd);
        agent.socket = std::move(socket);
        agents_.push_back(std::move(agent));
    }

    static std::optional<CallSecret> parse_secret(const std::string& hex) {
        try {
            return CallSecret::from_hex(hex);
        } catch (const std::invalid_argument&) {
            return std::nullopt;
        }
    }

    void serve_agent(Agent& agent) {
        std::vector<UniqueFd> fds;
        std::optional<ForkRequest> request;
        try {
            request = receive_fork_request(agent.socket.get(), fds);
        } catch (const std::exception&) {
        }
        if (!request) {  // the agent is gone or spoke nonsense: its workers go too
            forget_agent(agent);
            return;
        }
        request->caller = agent.pid;
        if (fds.empty()) {  // a library to load now, for the fork that comes next
            TemplateReply loaded;
            if (!request->library.empty()) {
                loaded = load_library_for_workers(request->library, request->library_origin);
                note_refusal(loaded);
            }
            if (!request->answer_load) return;
            try {
                send_reply(agent.socket.get(), loaded);
            } catch (const std::exception&) {
                forget_agent(agent);
            }
            return;
        }
        TemplateReply reply = fork_worker(*request, fds);
        std::vector<int> pidfd;
        if (reply.status == TemplateStatus::ok) pidfd.push_back(workers_.back().pidfd.get());
        try {
            send_reply(agent.socket.get(), reply, pidfd);
        } catch (const std::exception&) {
            forget_agent(agent);
        }
    }

    TemplateReply fork_worker(const ForkRequest& request, const std::vector<UniqueFd>& fds) {
        if (fds.size() < 3) return {TemplateStatus::failed, -1, "a fork request came without its fds"};
        if (load_time_signature(request.env) != signature_)
            return {TemplateStatus::failed, -1,
                    "the worker's load-time variables (LD_*, GLIBC_TUNABLES, OMP_*...) differ from the template's"};
        const TemplateReply ready = ready_to_fork(request);
        note_refusal(ready);
        if (ready.status != TemplateStatus::ok) return ready;
        Worker worker;
        std::string how;
        if (std::optional<ChildProcess> spare = hand_to_spare(request, fds)) {
            worker.pid = spare->pid;
            worker.pidfd = std::move(spare->pidfd);
            how = spare_note;
        } else {
            const pid_t pid = ::fork();
            if (pid < 0)
                return {errno == EAGAIN ? TemplateStatus::no_process_slot : TemplateStatus::failed, -1,
                        fmt::format("fork failed: {}", std::strerror(errno))};
            if (pid == 0) become_worker(request, fds, devnull_.get(), ::getppid(), worker_name_);
            try {
                ChildProcess process = adopt_child(pid);
                worker.pid = process.pid;
                worker.pidfd = std::move(process.pidfd);
            } catch (const SpawnError& e) {  // killed and reaped
                return {TemplateStatus::failed, -1, e.what()};
            }
        }
        worker.agent = request.caller;
        const pid_t pid = worker.pid;
        workers_.push_back(std::move(worker));
        spares_wanted_ = std::max(spares_wanted_, std::min(workers_.size(), most_spares));
        return {TemplateStatus::ok, pid, how};
    }

    // The oldest spare that has every library loaded now takes the request; those that
    // lack one, or are gone, are ended. Nullopt: no spare could.
    std::optional<ChildProcess> hand_to_spare(const ForkRequest& request, const std::vector<UniqueFd>& fds) {
        std::vector<int> raw;
        for (const UniqueFd& fd : fds) raw.push_back(fd.get());
        while (!spares_.empty()) {
            Spare spare = std::move(spares_.front());
            spares_.pop_front();
            if (spare.libraries == loaded_library_count()) {
                try {
                    send_fork_request(spare.socket.get(), request, raw);
                    ChildProcess process;
                    process.pid = spare.pid;
                    process.pidfd = std::move(spare.pidfd);
                    return process;
                } catch (const std::system_error&) {  // it died waiting
                }
            }
            end_spare(spare);
        }
        return std::nullopt;
    }

    void fork_spare() {
        int pair[2];
        if (thread_count() != 1 || ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
            spares_wanted_ = spares_.size();  // not now: the next worker's fork says why
            return;
        }
        UniqueFd ours(pair[0]), its(pair[1]);
        const pid_t parent = ::getpid();
        const pid_t pid = ::fork();
        if (pid == 0) become_spare(its.get(), parent);
        try {
            if (pid < 0) throw SpawnError(std::strerror(errno));
            ChildProcess process = adopt_child(pid);
            Spare spare;
            spare.pid = process.pid;
            spare.pidfd = std::move(process.pidfd);
            spare.socket = std::move(ours);
            spare.libraries = loaded_library_count();
            spares_.push_back(std::move(spare));
        } catch (const SpawnError&) {  // out of processes or memory: make do with those there are
            spares_wanted_ = spares_.size();
        }
    }

    // In the forked spare: it keeps only its socket and /dev/null (what the template holds,
    // its agents' sockets and its stdin, must close when the template closes them), waits,
    // and becomes the worker it is asked for. It dies with the template.
    [[noreturn]] void become_spare(int socket, pid_t parent) {
        if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(70);
        constexpr int spare_socket_fd = 3, spare_devnull_fd = 4;
        const int socket_above = ::fcntl(socket, F_DUPFD_CLOEXEC, 10);
        const int devnull_above = ::fcntl(devnull_.get(), F_DUPFD_CLOEXEC, 10);
        if (socket_above < 0 || devnull_above < 0 || ::dup2(socket_above, spare_socket_fd) < 0 ||
            ::dup2(devnull_above, spare_devnull_fd) < 0)
            ::_exit(70);
        close_fds_from(spare_devnull_fd + 1);
        ::prctl(PR_SET_NAME, "mpify-spare");
        std::vector<UniqueFd> fds;
        std::optional<ForkRequest> request;
        try {
            request = receive_fork_request(spare_socket_fd, fds);
        } catch (const std::exception&) {
        }
        if (!request || fds.size() < 3) ::_exit(0);  // ended by the template, or the template is gone
        become_worker(*request, fds, spare_devnull_fd, parent, worker_name_);
    }

    void end_spare(Spare& spare) {
        spare.socket.reset();
        kill_and_reap(spare.pid, spare.pidfd.get());
    }

    // A library changed on disk, or a thread started: a fresh template serves the next call.
    void note_refusal(const TemplateReply& reply) {
        if (retiring_ || (reply.status != TemplateStatus::stale_library && reply.status != TemplateStatus::unusable))
            return;
        retiring_ = true;
        for (Spare& spare : spares_) end_spare(spare);
        spares_.clear();
        say(reply.message + "; this template ends once idle");
    }

    // The worker has ended: what it started goes with it, then its agent is told how it ended.
    void reap(Worker& worker) {
        ::kill(-worker.pid, SIGKILL);
        siginfo_t info{};
        if (!wait_for_child(worker.pid, &info)) info.si_code = CLD_KILLED, info.si_status = SIGKILL;
        for (Agent& agent : agents_) {
            if (agent.pid != worker.agent || !agent.socket) continue;
            try {
                send_reply(agent.socket.get(),
                           {TemplateStatus::worker_ended, worker.pid, encode_worker_end(info.si_code, info.si_status)});
            } catch (const std::exception&) {
                forget_agent(agent);
            }
        }
    }

    // An agent whose socket closed: its workers are stopped (and reaped as they end).
    void forget_agent(Agent& agent) {
        agent.socket.reset();
        for (const Worker& worker : workers_)
            if (worker.agent == agent.pid) signal_child_and_group(worker.pidfd.get(), worker.pid, SIGKILL);
    }

    std::chrono::seconds idle_limit_;
    std::string signature_;  // of the environment it loaded its libraries with
    UniqueFd devnull_;
    Clock::time_point last_busy_;
    std::list<Agent> agents_;
    std::list<Worker> workers_;
    std::string pending_;  // stdin bytes not yet a whole line
    bool retiring_ = false;
    std::unique_ptr<AgentForker> forker_;  // null: the template forks its agents itself
    std::list<Spare> spares_;
    std::size_t spares_wanted_ = 0;  // the most workers it has had at once, up to most_spares
    char worker_name_[16] = {};
};

}  // namespace

void serve_if_node_template() {
    if (std::getenv(node_template_env_var) == nullptr) return;
    const auto idle =
        environment_number(node_template_env_var, 600, Malformed::use_fallback, "mpify node template", 0, INT_MAX);
    ::unsetenv(node_template_env_var);  // what it starts (agents, workers) is no node template
    NodeTemplate(std::chrono::seconds(idle)).run();
}

MPIFY_END_DETAIL_NAMESPACE
