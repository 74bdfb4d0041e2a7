#include "worker/stand_in.hpp"

#include "common/byte_codec.hpp"
#include "common/poll_set.hpp"
#include "common/posix.hpp"
#include "common/unique_fd.hpp"
#include "contract/process_contract.hpp"
#include "contract/remote_link.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fmt/format.h>
#include <optional>
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Bytes waiting for the caller's side beyond which the link is not read: the agent's
// queue fills up in turn and the remote worker's writes wait.
constexpr std::size_t most_waiting = std::size_t(8) << 20;

class StandIn {
public:
    StandIn(std::string who, int signals) : who_(std::move(who)), signals_(signals) {
        for (int fd : {stand_in_control_fd, STDOUT_FILENO, STDERR_FILENO, worker_channel_fd, stand_in_link_fd})
            set_blocking(fd, false);
    }

    [[noreturn]] void run() {
        std::string lost;
        while (lost.empty() && !link_closed_) lost = relay_once();
        if (lost.empty() && !end_)
            lost = "its connection closed before the rank ended (its agent or machine went away)";
        finish(lost);
    }

private:
    std::string relay_once() {
        const bool room = to_channel_.size() + to_out_.size() + to_err_.size() < most_waiting;
        // A silence while the link is not read is this end's doing, not the agent's.
        if (!room) heartbeat_.heard(Clock::now());
        PollSet& fds = poll_set_;
        fds.clear();
        fds.add(stand_in_link_fd, (room ? POLLIN : 0) | (to_link_.empty() ? 0 : POLLOUT));
        fds.add(channel_open_ && to_link_.size() < most_waiting ? worker_channel_fd : -1, POLLIN);
        fds.add(to_channel_.empty() ? -1 : worker_channel_fd, POLLOUT);
        fds.add(to_out_.empty() ? -1 : STDOUT_FILENO, POLLOUT);
        fds.add(to_err_.empty() ? -1 : STDERR_FILENO, POLLOUT);
        fds.add(signals_, POLLIN);
        fds.add(control_open_ ? stand_in_control_fd : -1, POLLIN | (to_control_.empty() ? 0 : POLLOUT));
        fds.wait(heartbeat_.wake_at());

        if (fds.revents(0) & (POLLIN | POLLHUP | POLLERR))
            if (std::string failure = read_link(); !failure.empty()) return failure;
        if (fds.revents(1)) read_channel();
        if (fds.revents(2)) to_channel_.flush(worker_channel_fd);
        if (fds.revents(3)) to_out_.flush(STDOUT_FILENO);
        if (fds.revents(4)) to_err_.flush(STDERR_FILENO);
        if (fds.revents(5)) forward_signals();
        if (fds.revents(6) & (POLLIN | POLLHUP | POLLERR)) read_control();
        if (fds.revents(6) & POLLOUT) to_control_.flush(stand_in_control_fd);

        const Clock::time_point now = Clock::now();
        if (heartbeat_.silent(now))
            return fmt::format("nothing came from it for {} s (its machine, or the network between, is down)",
                               link_silence_limit.count() / 1000);
        heartbeat_.beat(to_link_, now);
        if (!to_link_.flush(stand_in_link_fd) && !end_) return "its connection failed";
        return {};
    }

    std::string read_link() {
        try {
            link_closed_ = !reader_.read_available(stand_in_link_fd, [this](LinkMessage& message) { take(message); });
        } catch (const std::exception& e) {
            return fmt::format("its agent sent what mpify does not send ({})", e.what());
        }
        heartbeat_.heard(Clock::now());
        return {};
    }

    void take(LinkMessage& message) {
        switch (message.type) {
            case LinkType::channel: to_channel_.append(message.payload); break;
            case LinkType::out: to_out_.append(message.payload); break;
            case LinkType::err: to_err_.append(message.payload); break;
            case LinkType::exited: end_ = decode_end(message.payload); break;
            case LinkType::stacks: {
                ByteWriter answer;
                answer.str(message.payload);
                to_control_.append(answer.take());
                break;
            }
            case LinkType::alive: break;
            default:
                throw std::runtime_error(fmt::format("a message of type {} mid-call", static_cast<int>(message.type)));
        }
    }

    void read_channel() {
        if (!channel_open_) return;
        const DrainEnd end = drain_available(worker_channel_fd, [this](std::string_view piece) {
            to_link_.push(LinkType::channel, piece);
            return true;
        });
        if (end == DrainEnd::closed) channel_open_ = false;  // the caller is done sending (or gone)
    }

    // The caller asks where the rank is (a byte per question: questions that came
    // together are one); the agent reads it and the answer comes back as `stacks`.
    void read_control() {
        bool asked = false;
        const DrainEnd end = drain_available(stand_in_control_fd, [&](std::string_view) {
            asked = true;
            return true;
        });
        if (asked) to_link_.push(LinkType::stacks_wanted, {});
        if (end == DrainEnd::closed) control_open_ = false;  // the caller is done (or gone)
    }

    void forward_signals() {
        signalfd_siginfo info{};
        while (retry_on_eintr([&] { return ::read(signals_, &info, sizeof info); }) == sizeof info)
            to_link_.push(LinkType::signal, encode_number(static_cast<int>(info.ssi_signo)));
    }

    // Hands over what is left for the caller, then ends as the remote worker ended.
    [[noreturn]] void finish(const std::string& lost) {
        for (int fd : {worker_channel_fd, STDOUT_FILENO, STDERR_FILENO}) set_blocking(fd, true);
        to_channel_.flush(worker_channel_fd);
        to_out_.flush(STDOUT_FILENO);
        to_err_.flush(STDERR_FILENO);
        if (!lost.empty()) {
            std::fprintf(stderr, "%s%s: %s\n", lost_rank_line_prefix, who_.c_str(), lost.c_str());
            std::fflush(stderr);
            ::_exit(lost_rank_exit_code);
        }
        if (end_->exited) ::_exit(end_->status);
        // Killed by a signal there: killed by the same signal here, without a core dump.
        const rlimit no_core{0, 0};
        ::setrlimit(RLIMIT_CORE, &no_core);
        ::signal(end_->status, SIG_DFL);
        sigset_t only;
        sigemptyset(&only);
        sigaddset(&only, end_->status);
        ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
        ::kill(::getpid(), end_->status);
        ::_exit(128 + end_->status);  // a signal whose default is to go on
    }

    std::string who_;
    int signals_;
    LinkReader reader_;
    LinkQueue to_link_;
    OutgoingBytes to_channel_, to_out_, to_err_;  // for fds 3, 1 and 2
    OutgoingBytes to_control_;                     // answers for fd 0
    std::optional<WorkerEnd> end_;
    bool channel_open_ = true, link_closed_ = false, control_open_ = true;
    PollSet poll_set_;
    LinkHeartbeat heartbeat_;
};

}  // namespace

void serve_if_standing_in() {
    const char* who = std::getenv(stand_in_env_var);
    if (who == nullptr) return;
    // The supervisor's SIGTERM (and a terminal's SIGINT, SIGHUP) go to the remote worker.
    sigset_t forwarded;
    sigemptyset(&forwarded);
    for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&forwarded, s);
    ::sigprocmask(SIG_BLOCK, &forwarded, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    const int signals = ::signalfd(-1, &forwarded, SFD_CLOEXEC | SFD_NONBLOCK);
    if (signals < 0) {
        std::fprintf(stderr, "mpify: the stand-in of rank %s cannot watch its signals: %s\n", who,
                     std::strerror(errno));
        ::_exit(lost_rank_exit_code);
    }
    StandIn(who, signals).run();
}

MPIFY_END_DETAIL_NAMESPACE
