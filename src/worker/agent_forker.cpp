#include "worker/agent_forker.hpp"

#include "common/posix.hpp"
#include "contract/template_protocol.hpp"
#include "worker/fork_for_parent.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Longer than any fork takes: a forker that does not answer in this time is taken as gone.
constexpr int answer_patience_ms = 10000;

// The forker's answers: one signed number a message. At its start 0 (it can fork agents
// as the template's children) or -1 (it cannot); then, for each request, the agent's pid
// or minus the errno of its fork.
void send_number(int socket, std::int64_t value) {
    std::string bytes(sizeof value, '\0');
    std::memcpy(bytes.data(), &value, sizeof value);
    send_message_with_fds(socket, bytes, {});
}

std::optional<std::int64_t> receive_number(int socket) {
    pollfd ready{socket, POLLIN, 0};
    if (retry_on_eintr([&] { return ::poll(&ready, 1, answer_patience_ms); }) != 1) return std::nullopt;
    try {
        const std::optional<std::string> bytes = receive_message_with_fds(socket, nullptr);
        std::int64_t value;
        if (!bytes || bytes->size() != sizeof value) return std::nullopt;
        std::memcpy(&value, bytes->data(), sizeof value);
        return value;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

[[noreturn]] void serve_as_forker(int socket, const BecomeAgent& become_agent) {
    std::string why_not;
    const bool ready = prepare_fork_for_parent(why_not) == ForkReadiness::ready;
    try {
        send_number(socket, ready ? 0 : -1);
    } catch (const std::exception&) {
        ::_exit(0);
    }
    if (!ready) ::_exit(0);
    for (;;) {
        std::vector<UniqueFd> fds;
        std::optional<std::string> line;
        try {
            line = receive_message_with_fds(socket, &fds);
        } catch (const std::exception&) {
            ::_exit(0);
        }
        if (!line) ::_exit(0);  // the template is gone, or done with this forker
        const std::optional<AgentRequest> request = parse_agent_request(*line);
        std::int64_t answer = -EINVAL;
        if (request && fds.size() == 1) {
            const pid_t pid = fork_for_parent();
            if (pid == 0) {
                ::close(socket);
                become_agent(*request, fds.front().get());
                ::_exit(70);
            }
            answer = pid > 0 ? pid : -errno;
        }
        fds.clear();  // the agent's socket: its own copy is the only one left here
        try {
            send_number(socket, answer);
        } catch (const std::exception&) {
            ::_exit(0);
        }
    }
}

}  // namespace

std::unique_ptr<AgentForker> AgentForker::start(BecomeAgent become_agent) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return nullptr;
    UniqueFd ours(pair[0]), its(pair[1]);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) return nullptr;
    if (pid == 0) {
        ours.reset();
        if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(0);
        ::prctl(PR_SET_NAME, "mpify-forker");
        serve_as_forker(its.get(), become_agent);
    }
    its.reset();
    std::unique_ptr<AgentForker> forker(new AgentForker(std::move(ours), pid));
    const std::optional<std::int64_t> ready = receive_number(forker->socket_.get());
    if (ready == std::int64_t{0}) return forker;
    return nullptr;  // the destructor ends and reaps it
}

pid_t AgentForker::fork_agent(const AgentRequest& request, int agent_socket) {
    std::string line = format_agent_request(request);
    line.pop_back();  // its newline
    try {
        send_message_with_fds(socket_.get(), line, {agent_socket});
    } catch (const std::system_error&) {
        errno = EPIPE;
        return -1;
    }
    const std::optional<std::int64_t> answer = receive_number(socket_.get());
    if (!answer) {
        errno = EPIPE;
        return -1;
    }
    if (*answer < 0) {
        errno = static_cast<int>(-*answer);
        return -1;
    }
    return static_cast<pid_t>(*answer);
}

AgentForker::~AgentForker() {
    socket_.reset();  // it exits as it reads the end
    kill_and_reap(pid_);
}

MPIFY_END_DETAIL_NAMESPACE
