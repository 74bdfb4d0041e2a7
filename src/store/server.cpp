#include "store/server.hpp"

#include "common/posix.hpp"
#include "store/message.hpp"

#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <system_error>

namespace mpify::detail::store {
namespace {

constexpr std::size_t max_connections = 1024;
// Replies a connection has not read: beyond this, it is not a rank, or it is stuck.
constexpr std::size_t max_unread_reply_bytes = 4 * max_body_bytes;

Message ok(std::int64_t number = 0, std::vector<std::string> fields = {}) {
    return Message{Tag::ok, number, std::move(fields)};
}

Message failed(std::string why) { return Message{Tag::failed, 0, {std::move(why)}}; }

// The remote address of a TCP connection; "" for a UNIX socket (or none known).
std::string peer_address(int fd) {
    sockaddr_storage peer{};
    socklen_t size = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &size) != 0 || peer.ss_family == AF_UNIX) return "";
    const std::string host = numeric_host(reinterpret_cast<sockaddr*>(&peer), size);
    return host == "?" ? "" : host;
}

}  // namespace

struct Server::Connection {
    UniqueFd fd;
    std::string peer;  ///< the remote address, for members' hosts
    std::string in;    ///< bytes received, not yet a whole message
    std::string out;   ///< replies not yet sent
    std::optional<Message> blocked;  ///< a get or wait whose keys are not all there yet
    Clock::time_point blocked_until;
    int member = -1;  ///< index into members_ once it introduced itself
};

struct Server::State {
    std::map<std::string, std::string> data;
    std::vector<std::unique_ptr<Connection>> connections;
};

Server::Server(Endpoint endpoint) : endpoint_(std::move(endpoint)), state_(std::make_unique<State>()) {
    listener_ = listen_at(endpoint_);
    wake_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_) throw std::system_error(errno, std::generic_category(), "mpify: eventfd for the store");
    // The serving thread takes no signal: they stay with the application's threads.
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    try {
        thread_ = std::thread([this] { serve(); });
    } catch (...) {
        pthread_sigmask(SIG_SETMASK, &previous, nullptr);
        throw;
    }
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

Server::~Server() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto written = ::write(wake_.get(), &one, sizeof one);
    thread_.join();
}

std::vector<Member> Server::members() const {
    std::lock_guard lock(members_mutex_);
    return members_;
}

bool Server::has_all(const std::vector<std::string>& keys) const {
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return state_->data.count(k) != 0; });
}

std::optional<Message> Server::answer_if_ready(const Message& m) const {
    if (!has_all(m.fields)) return std::nullopt;
    return m.tag == Tag::get ? ok(0, {state_->data.at(m.fields[0])}) : ok();
}

void Server::set_member_state(Connection& c, Member::State state, std::string note) {
    if (c.member < 0) return;
    std::lock_guard lock(members_mutex_);
    Member& m = members_[static_cast<std::size_t>(c.member)];
    m.state = state;
    m.note = std::move(note);
}

Message Server::introduce(Connection& c, const Message& m) {
    if (m.fields.size() != 3 || (m.fields[0] != "rank" && m.fields[0] != "caller"))
        return failed("introduce takes a kind, a host and a number of local ranks");
    Member member;
    member.kind = m.fields[0] == "rank" ? Member::Kind::rank : Member::Kind::caller;
    member.number = static_cast<int>(m.number);
    member.local_ranks = std::atoi(m.fields[2].c_str());
    member.host = c.peer.empty() || m.fields[1] == c.peer ? m.fields[1] : fmt::format("{} ({})", m.fields[1], c.peer);
    std::lock_guard lock(members_mutex_);
    if (c.member >= 0) {  // introduced again after reconnecting: the same member
        members_[static_cast<std::size_t>(c.member)] = member;
    } else {
        c.member = static_cast<int>(members_.size());
        members_.push_back(member);
    }
    return ok();
}

std::optional<Message> Server::handle(Connection& c, Message m) {
    std::map<std::string, std::string>& data = state_->data;
    auto fields_are = [&](std::size_t n) { return m.fields.size() == n; };
    switch (m.tag) {
        case Tag::introduce:
            return introduce(c, m);
        case Tag::set:
            if (!fields_are(2)) return failed("set takes a key and a value");
            data[m.fields[0]] = m.fields[1];
            return ok();
        case Tag::compare_set: {
            // As c10d's stores: set `desired` when the value is `expected` (an absent key
            // counts as the empty value); answer the value stored afterwards.
            if (!fields_are(3)) return failed("compare_set takes a key, an expected and a desired value");
            auto found = data.find(m.fields[0]);
            if (found == data.end()) {
                if (!m.fields[1].empty()) return ok(0, {m.fields[1]});
                data[m.fields[0]] = m.fields[2];
                return ok(0, {m.fields[2]});
            }
            if (found->second == m.fields[1]) found->second = m.fields[2];
            return ok(0, {found->second});
        }
        case Tag::add: {
            if (!fields_are(1)) return failed("add takes a key");
            std::string& value = data[m.fields[0]];
            const long long now = (value.empty() ? 0 : std::atoll(value.c_str())) + m.number;
            value = std::to_string(now);
            return ok(now);
        }
        case Tag::remove:
            if (!fields_are(1)) return failed("remove takes a key");
            return ok(data.erase(m.fields[0]) ? 1 : 0);
        case Tag::check:
            return ok(has_all(m.fields) ? 1 : 0);
        case Tag::count:
            return ok(static_cast<std::int64_t>(data.size()));
        case Tag::get:
        case Tag::wait: {
            if (m.tag == Tag::get && !fields_are(1)) return failed("get takes a key");
            if (auto reply = answer_if_ready(m)) return reply;
            // number: how long the caller waits, in ms; it hears "timed out" after that.
            c.blocked_until = Clock::now() + std::chrono::milliseconds(std::clamp<std::int64_t>(
                                                 m.number, 0, std::int64_t{24} * 3600 * 1000));
            c.blocked = std::move(m);
            return std::nullopt;
        }
        case Tag::members: {
            std::lock_guard lock(members_mutex_);
            return ok(0, encode_members(members_));
        }
        case Tag::leave:
            set_member_state(c, m.number == 0 ? Member::State::left : Member::State::failed,
                             m.fields.empty() ? "" : m.fields[0]);
            return ok();
        case Tag::ok:
        case Tag::failed:
            break;
    }
    return failed("not a request");
}

void Server::process(Connection& c) {
    while (!c.blocked) {
        std::optional<Message> request = take_message(c.in);  // throws MalformedMessage
        if (!request) return;
        if (auto reply = handle(c, std::move(*request))) c.out += encode(*reply);
    }
}

Server::Clock::time_point Server::settle_blocked(Clock::time_point now) {
    auto next_deadline = Clock::time_point::max();
    for (auto& c : state_->connections) {
        if (!c->blocked) continue;
        if (auto reply = answer_if_ready(*c->blocked)) {
            c->out += encode(*reply);
        } else if (c->blocked_until <= now) {
            c->out += encode(failed("timed out"));
        } else {
            next_deadline = std::min(next_deadline, c->blocked_until);
            continue;
        }
        c->blocked.reset();
        try {
            process(*c);  // what it sent while it waited
        } catch (const MalformedMessage&) {
            c->in.clear();
            c->out.clear();
            c->fd.reset();  // serve drops it
        }
    }
    return next_deadline;
}

void Server::drop(std::size_t index) {
    Connection& c = *state_->connections[index];
    if (c.member >= 0) {
        std::lock_guard lock(members_mutex_);
        Member& m = members_[static_cast<std::size_t>(c.member)];
        if (m.state == Member::State::present) m.state = Member::State::gone;
    }
    state_->connections.erase(state_->connections.begin() + static_cast<std::ptrdiff_t>(index));
}

bool Server::exchange(Connection& c, short events) {
    if (events & POLLOUT) {
        const ssize_t sent = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent > 0) c.out.erase(0, static_cast<std::size_t>(sent));
        else if (sent < 0 && errno != EAGAIN && errno != EINTR) return false;
    }
    if (events & (POLLIN | POLLHUP | POLLERR)) {
        char chunk[65536];
        const ReadResult r = read_some(c.fd.get(), chunk, sizeof chunk);
        if (r.kind == ReadResult::bytes) {
            c.in.append(chunk, r.size);
            try {
                process(c);
            } catch (const MalformedMessage&) {
                return false;
            }
        } else if (r.kind != ReadResult::would_block) {
            return false;
        }
    }
    return c.out.size() <= max_unread_reply_bytes && c.in.size() <= 4 + max_body_bytes;
}

void Server::accept_one() {
    UniqueFd accepted(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!accepted) return;
    auto c = std::make_unique<Connection>();
    c->peer = peer_address(accepted.get());
    c->fd = std::move(accepted);
    state_->connections.push_back(std::move(c));
}

void Server::serve() {
    auto& connections = state_->connections;
    std::vector<pollfd> polled;
    for (;;) {
        const auto now = Clock::now();
        const auto next_deadline = settle_blocked(now);
        for (std::size_t i = connections.size(); i-- > 0;)
            if (!connections[i]->fd) drop(i);

        polled.assign({{wake_.get(), POLLIN, 0}, {listener_.get(), POLLIN, 0}});
        if (connections.size() >= max_connections) polled[1].fd = -1;  // poll skips it
        for (auto& c : connections)
            polled.push_back({c->fd.get(), static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
        int wait_ms = -1;
        if (next_deadline != Clock::time_point::max())
            wait_ms = static_cast<int>(std::clamp<long long>(
                std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline - now).count() + 1, 0, 60000));
        if (retry_on_eintr([&] { return ::poll(polled.data(), polled.size(), wait_ms); }) < 0) return;
        if (polled[0].revents != 0) return;  // stop

        // Connections first (indices match `polled`), then new ones.
        for (std::size_t i = connections.size(); i-- > 0;)
            if (!exchange(*connections[i], polled[i + 2].revents)) drop(i);
        if (polled[1].revents & POLLIN) accept_one();
    }
}

}  // namespace mpify::detail::store
