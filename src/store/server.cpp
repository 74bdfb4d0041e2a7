#include "store/server.hpp"

#include "common/poll_set.hpp"
#include "common/posix.hpp"
#include "common/signal_free_thread.hpp"
#include "store/message.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <system_error>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace store {
namespace {

// Replies a connection has not read: beyond this, it is not a rank, or it is stuck.
constexpr std::size_t max_unread_reply_bytes = 4 * max_body_bytes;
// A connection is unproven until it sent a whole, well-formed request: then it gets a
// message's worth of room; before, this little, for this long. (Ranks send a small
// request as soon as they connect.)
constexpr std::size_t unproven_bytes = 64 * 1024;
constexpr std::chrono::seconds unproven_time{30};
// What every connection together may hold (requests being received, replies being
// sent): beyond it, the connection that holds most is dropped.
constexpr std::size_t held_bytes_limit = 4 * max_body_bytes;
// Keys and values stored: beyond it, a set is refused.
constexpr std::size_t stored_bytes_limit = 16 * max_body_bytes;

// How many connections the store keeps at once: a quarter of this process's file
// descriptors (so that the caller's own never run out), 16 to 1024.
std::size_t connection_limit() {
    rlimit files{};
    const rlim_t soft = ::getrlimit(RLIMIT_NOFILE, &files) == 0 ? files.rlim_cur : 1024;
    return static_cast<std::size_t>(std::clamp<rlim_t>(soft / 4, 16, 1024));
}

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
    std::optional<Message> blocked;  ///< a get, wait or exchange whose keys are not all there yet
    Clock::time_point blocked_until;
    int member = -1;  ///< index into members_ once it introduced itself
    bool proven = false;  ///< it sent a whole, well-formed request
    /// Until it proved the store's secret (a store with one): the challenge it was sent.
    std::unique_ptr<WorkerAdmission> admission;
    Clock::time_point accepted_at = Clock::now();
    std::size_t held() const { return in.size() + out.size(); }
};

struct Server::State {
    std::map<std::string, std::string> data;
    std::size_t stored_bytes = 0;  ///< keys and values in `data`
    std::vector<std::unique_ptr<Connection>> connections;
    const std::size_t connection_limit = mpify::detail::store::connection_limit();
    Clock::time_point listener_paused_until{};  ///< after accept found no fd free
};

Server::Server(Endpoint endpoint, std::optional<CallSecret> secret)
    : endpoint_(std::move(endpoint)), secret_(std::move(secret)), state_(std::make_unique<State>()) {
    listener_ = listen_at(endpoint_);
    thread_ = start_signal_free_thread("mpify-store", [this] { serve(); });
}

Server::~Server() {
    wake_.notify();
    thread_.join();
}

std::vector<Member> Server::members() const {
    std::lock_guard lock(members_mutex_);
    return members_;
}

bool Server::has_all(std::vector<std::string>::const_iterator first,
                     std::vector<std::string>::const_iterator last) const {
    return std::all_of(first, last, [&](const std::string& k) { return state_->data.count(k) != 0; });
}

std::optional<Message> Server::answer_if_ready(const Message& m) const {
    // An exchange's first two fields are the key and value it set; it waits for the rest.
    const auto first = m.fields.begin() + (m.tag == Tag::exchange ? 2 : 0);
    if (!has_all(first, m.fields.end())) return std::nullopt;
    if (m.tag == Tag::wait) return ok();
    std::vector<std::string> values;
    for (auto key = first; key != m.fields.end(); ++key) values.push_back(state_->data.at(*key));
    return ok(0, std::move(values));
}

void Server::set_member_state(Connection& c, Member::State state, std::string note) {
    if (c.member < 0) return;
    std::lock_guard lock(members_mutex_);
    Member& m = members_[static_cast<std::size_t>(c.member)];
    m.state = state;
    m.note = std::move(note);
}

Message Server::introduce(Connection& c, const Message& m) {
    if (m.fields.size() != 2) return failed("introduce takes a host and a number of local ranks");
    Member member;
    member.number = static_cast<int>(m.number);
    member.local_ranks = std::atoi(m.fields[1].c_str());
    member.host = c.peer.empty() || m.fields[0] == c.peer ? m.fields[0] : fmt::format("{} ({})", m.fields[0], c.peer);
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
        case Tag::introduce: return introduce(c, m);
        case Tag::set:
            if (!fields_are(2)) return failed("set takes a key and a value");
            if (!store_value(m.fields[0], m.fields[1])) return failed(store_full());
            return ok();
        case Tag::compare_set: {
            // As c10d's stores: set `desired` when the value is `expected` (an absent key
            // counts as the empty value); answer the value stored afterwards.
            if (!fields_are(3)) return failed("compare_set takes a key, an expected and a desired value");
            auto found = data.find(m.fields[0]);
            if (found == data.end()) {
                if (!m.fields[1].empty()) return ok(0, {m.fields[1]});
                if (!store_value(m.fields[0], m.fields[2])) return failed(store_full());
                return ok(0, {m.fields[2]});
            }
            if (found->second == m.fields[1] && !store_value(m.fields[0], m.fields[2])) return failed(store_full());
            return ok(0, {data.at(m.fields[0])});
        }
        case Tag::add: {
            if (!fields_are(1)) return failed("add takes a key");
            const auto found = data.find(m.fields[0]);
            const long long now = (found == data.end() ? 0 : std::atoll(found->second.c_str())) + m.number;
            if (!store_value(m.fields[0], std::to_string(now))) return failed(store_full());
            return ok(now);
        }
        case Tag::remove: {
            if (!fields_are(1)) return failed("remove takes a key");
            const auto found = data.find(m.fields[0]);
            if (found == data.end()) return ok(0);
            state_->stored_bytes -= found->first.size() + found->second.size();
            data.erase(found);
            return ok(1);
        }
        case Tag::check: return ok(has_all(m.fields.begin(), m.fields.end()) ? 1 : 0);
        case Tag::count: return ok(static_cast<std::int64_t>(data.size()));
        case Tag::exchange:
            if (m.fields.size() < 2) return failed("exchange takes a key, a value and the keys to wait for");
            if (!store_value(m.fields[0], m.fields[1])) return failed(store_full());
            [[fallthrough]];
        case Tag::get:
        case Tag::wait: {
            if (m.tag == Tag::get && !fields_are(1)) return failed("get takes a key");
            if (auto reply = answer_if_ready(m)) return reply;
            // number: how long the caller waits, in ms; it hears "timed out" after that.
            c.blocked_until =
                Clock::now() +
                std::chrono::milliseconds(std::clamp<std::int64_t>(m.number, 0, std::int64_t{24} * 3600 * 1000));
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
        case Tag::failed: break;
    }
    return failed("not a request");
}

void Server::admit(Connection& c) {
    if (c.in.size() < WorkerAdmission::answer_size) return;
    constexpr int any_number = 1 << 30;  // a store's clients prove the secret, not a rank
    try {
        c.admission->check(std::string_view(c.in).substr(0, WorkerAdmission::answer_size), any_number);
    } catch (const HandshakeRefused& e) {
        throw MalformedMessage(e.what());
    }
    c.out += c.admission->caller_proof();
    c.in.erase(0, WorkerAdmission::answer_size);
    c.admission.reset();
}

void Server::process(Connection& c) {
    if (c.admission) admit(c);
    if (c.admission) return;
    while (!c.blocked) {
        std::optional<Message> request = take_message(c.in);  // throws MalformedMessage
        if (!request) return;
        c.proven = true;
        if (auto reply = handle(c, std::move(*request))) c.out += encode(*reply);
    }
}

Clock::time_point Server::settle_blocked(Clock::time_point now) {
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
        if (m.state == Member::State::present) {
            m.state = Member::State::gone;
            (void)store_value(silent_departure_key, m.host);  // full: the members still say it
        }
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
    return c.out.size() <= max_unread_reply_bytes && c.in.size() <= 4 + (c.proven ? max_body_bytes : unproven_bytes);
}

bool Server::store_value(const std::string& key, std::string value) {
    const auto found = state_->data.find(key);
    const std::size_t before = found == state_->data.end() ? 0 : key.size() + found->second.size();
    const std::size_t after = state_->stored_bytes - before + key.size() + value.size();
    if (after > stored_bytes_limit && after > state_->stored_bytes) return false;
    state_->data[key] = std::move(value);
    state_->stored_bytes = after;
    return true;
}

std::string Server::store_full() {
    return fmt::format("the store holds {} MiB of keys and values, its limit: a group stores a few bytes per rank, "
                       "so this is not one of mpify's ranks",
                       stored_bytes_limit >> 20);
}

std::optional<std::size_t> Server::oldest_unproven() const {
    std::optional<std::size_t> oldest;
    const auto& connections = state_->connections;
    for (std::size_t i = 0; i < connections.size(); ++i)
        if (!connections[i]->proven && (!oldest || connections[i]->accepted_at < connections[*oldest]->accepted_at))
            oldest = i;
    return oldest;
}

void Server::accept_one() {
    auto& connections = state_->connections;
    UniqueFd accepted(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!accepted) {
        // No fd free (EMFILE, ENFILE): the connection waits in the backlog. Make room by
        // dropping an unproven connection, or rest the listener a moment, not spin on it.
        if (errno == EMFILE || errno == ENFILE) {
            if (const auto victim = oldest_unproven()) drop(*victim);
            else state_->listener_paused_until = Clock::now() + std::chrono::milliseconds(100);
        }
        return;
    }
    // On a UNIX socket, only this user's processes (the group's ranks) are served.
    if (!endpoint_.unix_path.empty() && !peer_is_this_user(accepted.get())) return;  // `accepted` closes
    // At the limit, a newcomer takes the place of the oldest unproven connection; when
    // every connection has proven itself, the newcomer is refused.
    if (connections.size() >= state_->connection_limit) {
        const auto victim = oldest_unproven();
        if (!victim) return;  // `accepted` closes
        drop(*victim);
    }
    auto c = std::make_unique<Connection>();
    c->peer = peer_address(accepted.get());
    c->fd = std::move(accepted);
    if (secret_) {
        c->admission = std::make_unique<WorkerAdmission>(*secret_);
        c->out = c->admission->challenge();
    }
    connections.push_back(std::move(c));
}

void Server::drop_what_overflows(Clock::time_point now) {
    auto& connections = state_->connections;
    for (std::size_t i = connections.size(); i-- > 0;)
        if (!connections[i]->proven && now - connections[i]->accepted_at >= unproven_time) drop(i);
    std::size_t held = 0;
    for (const auto& c : connections) held += c->held();
    while (held > held_bytes_limit) {
        // The connection that holds most goes (an unproven one first): it is the one
        // sending what no rank sends.
        std::size_t largest = 0;
        for (std::size_t i = 1; i < connections.size(); ++i)
            if (std::make_pair(!connections[i]->proven, connections[i]->held()) >
                std::make_pair(!connections[largest]->proven, connections[largest]->held()))
                largest = i;
        held -= connections[largest]->held();
        drop(largest);
    }
}

void Server::serve() {
    auto& connections = state_->connections;
    PollSet polled;
    for (;;) {
        const auto now = Clock::now();
        auto next_deadline = settle_blocked(now);
        for (std::size_t i = connections.size(); i-- > 0;)
            if (!connections[i]->fd) drop(i);
        drop_what_overflows(now);
        for (const auto& c : connections)
            if (!c->proven) next_deadline = std::min(next_deadline, c->accepted_at + unproven_time);

        polled.clear();
        polled.add(wake_.fd(), POLLIN);
        const bool listening = now >= state_->listener_paused_until;
        polled.add(listening ? listener_.get() : -1, POLLIN);
        if (!listening) next_deadline = std::min(next_deadline, state_->listener_paused_until);
        for (auto& c : connections)
            polled.add(c->fd.get(), static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)));
        std::optional<Clock::time_point> wake_at;
        if (next_deadline != Clock::time_point::max()) wake_at = next_deadline;
        try {
            polled.wait(wake_at);
        } catch (const std::system_error&) {
            return;  // nothing this thread can wait on: the store ends, its clients see it gone
        }
        if (polled.revents(0) != 0) return;  // stop

        // Connections first (indices match `polled`), then new ones.
        for (std::size_t i = connections.size(); i-- > 0;)
            if (!exchange(*connections[i], polled.revents(i + 2))) drop(i);
        if (polled.revents(1) & POLLIN) accept_one();
    }
}

}  // namespace store
MPIFY_END_DETAIL_NAMESPACE
