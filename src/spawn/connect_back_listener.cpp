#include "spawn/connect_back_listener.hpp"

#include "common/endpoint.hpp"
#include "common/posix.hpp"

#include <mpify/error.hpp>

#include <fmt/format.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mpify::detail {

// A connection that has not proven itself yet.
struct ConnectBackListener::Pending {
    UniqueFd fd;              // non-blocking until admitted
    std::string peer;         // its address, for refusals
    WorkerAdmission admission;
    std::string answer;       // what it has sent so far
    Clock::time_point until;  // its patience ends
    Pending(UniqueFd f, std::string p, const CallSecret& secret, Clock::time_point u)
        : fd(std::move(f)), peer(std::move(p)), admission(secret), until(u) {}
};

namespace {

bool is_wildcard(const std::string& address) {
    in6_addr any6{};
    in_addr any4{};
    if (::inet_pton(AF_INET, address.c_str(), &any4) == 1) return any4.s_addr == htonl(INADDR_ANY);
    if (::inet_pton(AF_INET6, address.c_str(), &any6) == 1) return std::memcmp(&any6, &in6addr_any, sizeof any6) == 0;
    return address.empty() || address == "*";
}

void set_blocking(int fd, bool blocking) {
    const int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK);
}

// Sends all of `bytes` on a non-blocking socket; false when it would block or fails
// (a handshake message is smaller than any socket buffer: a fresh connection takes it).
bool send_small(int fd, const std::string& bytes) {
    const ssize_t sent = retry_on_eintr([&] { return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL); });
    return sent == static_cast<ssize_t>(bytes.size());
}

std::string peer_address(int fd) {
    sockaddr_storage peer{};
    socklen_t size = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &size) != 0) return "?";
    return numeric_host(reinterpret_cast<sockaddr*>(&peer), size);
}

}  // namespace

ConnectBackListener::ConnectBackListener(const std::string& address, int port) : address_(address) {
    if (is_wildcard(address))
        throw UsageError(fmt::format("mpify: remote workers connect back to one address of this machine, the one "
                                     "on the route to their nodes, not to '{}' (every interface)", address));
    Endpoint endpoint;
    endpoint.host = address;
    endpoint.port = port;
    listener_ = listen_at(endpoint);
    port_ = endpoint.port;
    set_blocking(listener_.get(), false);
}

ConnectBackListener::~ConnectBackListener() = default;

std::map<int, UniqueFd> ConnectBackListener::admit(const CallSecret& secret, int world_size,
                                                   const std::vector<bool>& wanted, Clock::time_point deadline,
                                                   std::chrono::milliseconds patience) {
    patience_ = patience;
    std::map<int, UniqueFd> admitted;
    auto all_there = [&] {
        for (int rank = 0; rank < world_size; ++rank)
            if (rank < static_cast<int>(wanted.size()) && wanted[rank] && admitted.count(rank) == 0) return false;
        return true;
    };
    PollSet poll;
    while (!all_there() && Clock::now() < deadline) {
        poll.clear();
        poll.add(listener_.get(), POLLIN);
        Clock::time_point wake = deadline;
        for (const auto& p : pending_) {
            poll.add(p->fd.get(), POLLIN);
            wake = std::min(wake, p->until);
        }
        poll.wait(wake);
        // The pending ones first, by index as added (the listener is index 0).
        std::vector<std::unique_ptr<Pending>> still;
        for (std::size_t i = 0; i < pending_.size(); ++i) {
            Pending& p = *pending_[i];
            if (poll.revents(i + 1) != 0 && advance(p, world_size, wanted, admitted)) continue;
            if (Clock::now() >= p.until) {  // also for one that sends a byte now and then
                refuse(p, fmt::format("no proof within {} ms ({} of {} bytes)", patience_.count(), p.answer.size(),
                                      WorkerAdmission::answer_size));
                continue;
            }
            still.push_back(std::move(pending_[i]));
        }
        pending_ = std::move(still);
        if (poll.revents(0) != 0) accept_new(secret);
    }
    pending_.clear();  // the connections that were still proving themselves are closed
    return admitted;
}

void ConnectBackListener::accept_new(const CallSecret& secret) {
    for (;;) {
        UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!fd) return;  // none left (EAGAIN), or out of fds: the rest wait in the backlog
        auto pending = std::make_unique<Pending>(std::move(fd), "", secret, Clock::now() + patience_);
        pending->peer = peer_address(pending->fd.get());
        if (pending_.size() >= most_pending) {  // the one that has had longest to prove itself makes room
            refuse(*pending_.front(), fmt::format("closed to make room: {} connections were already proving "
                                                  "themselves", most_pending));
            pending_.erase(pending_.begin());
        }
        if (!send_small(pending->fd.get(), pending->admission.challenge())) {
            refuse(*pending, "the challenge could not be sent");
            continue;
        }
        pending_.push_back(std::move(pending));
    }
}

bool ConnectBackListener::advance(Pending& p, int world_size, const std::vector<bool>& wanted,
                                  std::map<int, UniqueFd>& admitted) {
    char buffer[128];
    const std::size_t missing = WorkerAdmission::answer_size - p.answer.size();
    const ReadResult got = read_some(p.fd.get(), buffer, std::min(missing, sizeof buffer));
    if (got.kind == ReadResult::would_block) return false;
    if (got.kind != ReadResult::bytes) {
        refuse(p, got.kind == ReadResult::end_of_file ? "it closed the connection before proving a rank"
                                                      : std::string("reading failed: ") + std::strerror(got.error_number));
        return true;
    }
    p.answer.append(buffer, got.size);
    if (p.answer.size() < WorkerAdmission::answer_size) return false;
    try {
        const int rank = p.admission.check(p.answer, world_size);
        if (rank >= static_cast<int>(wanted.size()) || !wanted[rank] || admitted.count(rank) != 0)
            throw HandshakeRefused(fmt::format("rank {} is not awaited (not placed remotely, or already here)", rank));
        if (!send_small(p.fd.get(), p.admission.caller_proof()))
            throw HandshakeRefused("the caller's proof could not be sent");
        set_blocking(p.fd.get(), true);
        admitted.emplace(rank, std::move(p.fd));
    } catch (const HandshakeRefused& e) {
        refuse(p, e.what());
    }
    return true;
}

void ConnectBackListener::refuse(const Pending& pending, const std::string& why) {
    refusals_.push_back(pending.peer + ": " + why);
}

}  // namespace mpify::detail
