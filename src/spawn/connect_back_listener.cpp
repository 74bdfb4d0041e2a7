#include "spawn/connect_back_listener.hpp"

#include "common/endpoint.hpp"
#include "common/posix.hpp"

#include <mpify/error.hpp>

#include <fmt/format.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

MPIFY_BEGIN_DETAIL_NAMESPACE

namespace {

bool is_wildcard(const std::string& address) {
    in6_addr any6{};
    in_addr any4{};
    if (::inet_pton(AF_INET, address.c_str(), &any4) == 1) return any4.s_addr == htonl(INADDR_ANY);
    if (::inet_pton(AF_INET6, address.c_str(), &any6) == 1) return std::memcmp(&any6, &in6addr_any, sizeof any6) == 0;
    return address.empty() || address == "*";
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

// A connection that has not proven itself yet.
struct ConnectBackListener::Pending {
    UniqueFd fd;              // non-blocking until admitted
    std::string peer;         // its address, for refusals
    WorkerAdmission admission;
    std::string answer;       // what it has sent so far
    Clock::time_point until;  // its patience ends
    Pending(UniqueFd f, const CallSecret& secret, Clock::time_point u)
        : fd(std::move(f)), peer(peer_address(fd.get())), admission(secret), until(u) {}
};

struct ConnectBackListener::Round {
    const CallSecret& secret;
    int world_size;
    const std::vector<bool>& wanted;
    std::chrono::milliseconds patience;
    std::map<int, UniqueFd>& admitted;
};

ConnectBackListener::ConnectBackListener(const std::string& address, int port) : address_(address) {
    if (is_wildcard(address))
        throw UsageError(fmt::format("mpify: remote workers connect back to one address of this machine, the one "
                                     "on the route to their nodes, not to '{}' (every interface)",
                                     address));
    Endpoint endpoint;
    endpoint.host = address;
    endpoint.port = port;
    listener_ = listen_at(endpoint);
    // The longest queue of connections the system allows (listen again, on Linux, only
    // resizes it): an agent's connection waits there behind a flood's instead of having
    // its SYN dropped.
    ::listen(listener_.get(), SOMAXCONN);
    port_ = endpoint.port;
    set_blocking(listener_.get(), false);
}

ConnectBackListener::~ConnectBackListener() = default;

std::map<int, UniqueFd> ConnectBackListener::admit(const CallSecret& secret, int world_size,
                                                   const std::vector<bool>& wanted, Clock::time_point deadline,
                                                   std::chrono::milliseconds patience,
                                                   const std::vector<int>& return_when_ready,
                                                   const std::function<bool()>& give_up) {
    std::map<int, UniqueFd> admitted;
    Round round{secret, world_size, wanted, patience, admitted};
    // Connections still proving themselves; those left when admission ends are closed.
    std::vector<std::unique_ptr<Pending>> pending;
    auto all_there = [&] {
        for (int rank = 0; rank < world_size; ++rank)
            if (rank < static_cast<int>(wanted.size()) && wanted[rank] && admitted.count(rank) == 0) return false;
        return true;
    };
    PollSet poll;
    bool told_to_return = false;
    while (!all_there() && !told_to_return && Clock::now() < deadline) {
        poll.clear();
        poll.add(listener_.get(), POLLIN);
        Clock::time_point wake = give_up ? std::min(deadline, Clock::now() + std::chrono::milliseconds(100)) : deadline;
        for (const auto& p : pending) {
            poll.add(p->fd.get(), POLLIN);
            wake = std::min(wake, p->until);
        }
        const std::size_t first_watched = poll.size();
        for (int fd : return_when_ready) poll.add(fd, POLLIN);
        poll.wait(wake);
        for (std::size_t i = first_watched; i < poll.size(); ++i)
            told_to_return = told_to_return || poll.revents(i) != 0;
        told_to_return = told_to_return || (give_up && give_up());
        // The pending ones first, by index as added (the listener is index 0).
        std::vector<std::unique_ptr<Pending>> still;
        for (std::size_t i = 0; i < pending.size(); ++i) {
            Pending& p = *pending[i];
            if (poll.revents(i + 1) != 0 && advance(p, round)) continue;
            if (Clock::now() >= p.until) {  // also for one that sends a byte now and then
                refuse(p, fmt::format("no proof within {} ms ({} of {} bytes)", patience.count(), p.answer.size(),
                                      WorkerAdmission::answer_size));
                continue;
            }
            still.push_back(std::move(pending[i]));
        }
        pending = std::move(still);
        if (poll.revents(0) != 0) accept_new(round, pending);
    }
    return admitted;
}

void ConnectBackListener::accept_new(Round& round, std::vector<std::unique_ptr<Pending>>& pending) {
    for (std::size_t accepted = 0; accepted < accepts_per_round; ++accepted) {
        UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!fd) return;  // none left (EAGAIN), or out of fds: the rest wait in the backlog
        auto arrived = std::make_unique<Pending>(std::move(fd), round.secret, Clock::now() + round.patience);
        if (pending.size() >= most_pending && !make_room(round, pending)) {
            refuse(*arrived, fmt::format("closed at once: {} connections were already proving themselves, each "
                                         "with part of a proof sent",
                                         most_pending));
            continue;
        }
        if (!send_small(arrived->fd.get(), arrived->admission.challenge())) {
            refuse(*arrived, "the challenge could not be sent");
            continue;
        }
        pending.push_back(std::move(arrived));
    }
}

bool ConnectBackListener::make_room(Round& round, std::vector<std::unique_ptr<Pending>>& pending) {
    // Oldest first: what each has sent is read before it is judged, so a worker whose
    // proof has arrived is admitted, not closed.
    for (auto it = pending.begin(); it != pending.end(); ++it) {
        Pending& p = **it;
        const bool done = advance(p, round);
        if (!done && !p.answer.empty()) continue;  // it has begun its proof: it keeps its place
        if (!done)
            refuse(p, fmt::format("closed to make room: {} connections were already proving themselves, and it "
                                  "had sent nothing",
                                  most_pending));
        pending.erase(it);
        return true;
    }
    return false;
}

bool ConnectBackListener::advance(Pending& p, Round& round) {
    const int world_size = round.world_size;
    const std::vector<bool>& wanted = round.wanted;
    std::map<int, UniqueFd>& admitted = round.admitted;
    char buffer[128];
    const std::size_t missing = WorkerAdmission::answer_size - p.answer.size();
    const ReadResult got = read_some(p.fd.get(), buffer, std::min(missing, sizeof buffer));
    if (got.kind == ReadResult::would_block) return false;
    if (got.kind != ReadResult::bytes) {
        refuse(p, got.kind == ReadResult::end_of_file
                      ? "it closed the connection before proving a rank"
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
        (void)send_small(p.fd.get(), WorkerAdmission::refusal());  // refused, not cut: no retry
        refuse(p, e.what());
    }
    return true;
}

void ConnectBackListener::refuse(const Pending& pending, const std::string& why) {
    ++refused_count_;
    // A flood refuses thousands a second: only the latest are kept.
    if (refusals_.size() == most_refusals_kept) refusals_.erase(refusals_.begin());
    refusals_.push_back(pending.peer + ": " + why);
}

MPIFY_END_DETAIL_NAMESPACE
