#include "worker/stand_in.hpp"

#include "common/poll_set.hpp"
#include "common/posix.hpp"
#include "common/unique_fd.hpp"
#include "contract/process_contract.hpp"
#include "contract/remote_link.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fmt/format.h>
#include <optional>
#include <string>

namespace mpify::detail {
namespace {

// Bytes waiting for the caller's side beyond which the link is not read: the agent's
// queue fills up in turn and the remote worker's writes wait.
constexpr std::size_t most_waiting = std::size_t(8) << 20;

// Bytes waiting for one of this process's fds (the channel, stdout, stderr).
struct Outgoing {
    int fd;
    std::string bytes;

    // Writes what the fd takes now; false once it is gone (what waits is dropped).
    bool flush() {
        while (!bytes.empty()) {
            const ssize_t n = retry_on_eintr([&] { return ::write(fd, bytes.data(), bytes.size()); });
            if (n > 0) {
                bytes.erase(0, static_cast<std::size_t>(n));
                continue;
            }
            if (n < 0 && errno == EAGAIN) return true;
            bytes.clear();
            return false;
        }
        return true;
    }
};

class StandIn {
public:
    StandIn(std::string who, int signals) : who_(std::move(who)), signals_(signals) {
        for (int fd : {STDOUT_FILENO, STDERR_FILENO, worker_channel_fd, stand_in_link_fd}) set_blocking(fd, false);
        last_heard_ = Clock::now();
        next_beat_ = last_heard_ + link_beat;
    }

    [[noreturn]] void run() {
        std::string lost;
        while (lost.empty() && !link_closed_) lost = relay_once();
        if (lost.empty() && !end_) lost = "its connection closed before the rank ended (its agent or machine went away)";
        finish(lost);
    }

private:
    std::string relay_once() {
        const bool room = channel_.bytes.size() + out_.bytes.size() + err_.bytes.size() < most_waiting;
        const Clock::time_point now = Clock::now();
        if (!room) last_heard_ = now;  // a silence while the link is not read is ours, not the agent's
        PollSet& fds = poll_set_;
        fds.clear();
        fds.add(stand_in_link_fd, (room ? POLLIN : 0) | (to_link_.empty() ? 0 : POLLOUT));
        fds.add(channel_open_ && to_link_.size() < most_waiting ? worker_channel_fd : -1, POLLIN);
        fds.add(channel_.bytes.empty() ? -1 : worker_channel_fd, POLLOUT);
        fds.add(out_.bytes.empty() ? -1 : STDOUT_FILENO, POLLOUT);
        fds.add(err_.bytes.empty() ? -1 : STDERR_FILENO, POLLOUT);
        fds.add(signals_, POLLIN);
        fds.wait(sooner(next_beat_, last_heard_ + link_silence_limit));

        if (fds.revents(0) & (POLLIN | POLLHUP | POLLERR))
            if (std::string failure = read_link(); !failure.empty()) return failure;
        if (fds.revents(1)) read_channel();
        if (fds.revents(2)) channel_.flush();
        if (fds.revents(3)) out_.flush();
        if (fds.revents(4)) err_.flush();
        if (fds.revents(5)) forward_signals();

        if (Clock::now() - last_heard_ >= link_silence_limit)
            return fmt::format("nothing came from it for {} s (its machine, or the network between, is down)",
                               link_silence_limit.count() / 1000);
        if (Clock::now() >= next_beat_) {
            to_link_.push(LinkType::alive, {});
            next_beat_ = Clock::now() + link_beat;
        }
        if (!to_link_.flush(stand_in_link_fd) && !end_) return "its connection failed";
        return {};
    }

    std::string read_link() {
        try {
            link_closed_ = !reader_.read_available(stand_in_link_fd, [this](LinkMessage& message) { take(message); });
        } catch (const std::exception& e) {
            return fmt::format("its agent sent what mpify does not send ({})", e.what());
        }
        last_heard_ = Clock::now();
        return {};
    }

    void take(LinkMessage& message) {
        switch (message.type) {
            case LinkType::channel: channel_.bytes += message.payload; break;
            case LinkType::out: out_.bytes += message.payload; break;
            case LinkType::err: err_.bytes += message.payload; break;
            case LinkType::exited: end_ = decode_end(message.payload); break;
            case LinkType::alive: break;
            default:
                throw std::runtime_error(fmt::format("a message of type {} mid-call", static_cast<int>(message.type)));
        }
    }

    void read_channel() {
        char buffer[64 * 1024];
        while (channel_open_) {
            const ReadResult got = read_some(worker_channel_fd, buffer, sizeof buffer);
            if (got.kind == ReadResult::would_block) return;
            if (got.kind != ReadResult::bytes) {
                channel_open_ = false;  // the caller is done sending (or gone)
                return;
            }
            to_link_.push(LinkType::channel, std::string_view(buffer, got.size));
        }
    }

    void forward_signals() {
        signalfd_siginfo info{};
        while (retry_on_eintr([&] { return ::read(signals_, &info, sizeof info); }) == sizeof info)
            to_link_.push(LinkType::signal, encode_number(static_cast<int>(info.ssi_signo)));
    }

    // Hands over what is left for the caller, then ends as the remote worker ended.
    [[noreturn]] void finish(const std::string& lost) {
        for (Outgoing* out : {&channel_, &out_, &err_}) {
            set_blocking(out->fd, true);
            out->flush();
        }
        if (!lost.empty()) {
            std::fprintf(stderr, "mpify: lost rank %s: %s\n", who_.c_str(), lost.c_str());
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
    Outgoing channel_{worker_channel_fd, {}}, out_{STDOUT_FILENO, {}}, err_{STDERR_FILENO, {}};
    std::optional<WorkerEnd> end_;
    bool channel_open_ = true, link_closed_ = false;
    PollSet poll_set_;
    Clock::time_point last_heard_, next_beat_;
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

}  // namespace mpify::detail
