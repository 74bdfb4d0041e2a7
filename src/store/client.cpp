#include "store/client.hpp"

#include "common/clock.hpp"
#include "common/posix.hpp"

#include <mpify/error.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace store {
namespace {

// How long past its own timeout a get or wait waits for the store's "timed out", and
// how long any other request may take: a store that does not answer by then is gone.
constexpr std::chrono::milliseconds answer_margin{2000};
// The longest wait the store serves (it clamps to the same): a day, which "no timeout"
// (c10d's 0) and milliseconds::max() both become, so that no deadline overflows.
constexpr std::chrono::milliseconds longest_wait{std::chrono::hours(24)};

std::chrono::milliseconds bounded(std::chrono::milliseconds timeout) {
    return timeout.count() <= 0 || timeout > longest_wait ? longest_wait : timeout;
}

enum class Wait { ready, timed_out, interrupted };

// Waits until `fd` has `events` or `deadline` passes. In the caller's own rank a
// rendezvous can wait minutes for another machine: it looks for an interrupt
// (mpify::request_interrupt) at least every 100 ms.
Wait wait_for(int fd, short events, Clock::time_point deadline, InterruptCheck interrupted) {
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) return Wait::timed_out;
        if (interrupted()) return Wait::interrupted;
        pollfd p{fd, events, 0};
        const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 100)));
        if (n > 0) return Wait::ready;
        if (n < 0 && errno != EINTR) return Wait::ready;  // the read or write that follows reports it
    }
}

}  // namespace

std::string as_string(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }
std::vector<uint8_t> as_bytes(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

Client::Client(Endpoint endpoint, std::chrono::milliseconds timeout, InterruptCheck interrupted,
               std::optional<CallSecret> secret, Connect when)
    : c10d::Store(timeout), endpoint_(std::move(endpoint)), interrupted_(interrupted), secret_(std::move(secret)) {
    if (when == Connect::now) fd_ = connect(Clock::now() + bounded(timeout));  // else call() connects
}

UniqueFd Client::connect(Clock::time_point deadline) const {
    UniqueFd fd = connect_to(endpoint_, deadline, interrupted_);
    if (!secret_) return fd;
    try {
        prove_to_caller(fd.get(), *secret_, 0, deadline);
    } catch (const HandshakeRefused& e) {
        throw Error(fmt::format("mpify: the group's rendezvous store at {} and this rank do not share the group's "
                                "secret ({}): is another program listening at that address?",
                                endpoint_.describe(), e.what()));
    }
    return fd;
}

Client::~Client() {
    if (!introduced_ || left_ || !fd_) return;
    try {
        leave(false, "");
    } catch (...) {
    }
}

Message Client::call(const Message& request, std::chrono::milliseconds patience) {
    std::lock_guard lock(mutex_);
    const auto deadline = Clock::now() + patience;
    if (!fd_) fd_ = connect(deadline);
    auto broken = [&](const std::string& why) {
        fd_.reset();  // half a reply may be on the way: the next request starts afresh
        return Error(fmt::format("mpify: the group's rendezvous store at {} {}", endpoint_.describe(), why));
    };
    auto await_socket = [&](short events, const char* not_in_time) {
        const Wait result = wait_for(fd_.get(), events, deadline, interrupted_);
        if (result == Wait::interrupted) throw broken("was left: the call was interrupted");
        if (result == Wait::timed_out) throw broken(fmt::format("{} within {} ms", not_in_time, patience.count()));
    };
    const std::string bytes = encode(request);
    for (std::size_t at = 0; at < bytes.size();) {
        await_socket(POLLOUT, "took no request");
        const ssize_t n = ::send(fd_.get(), bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR) throw broken(fmt::format("is gone ({})", std::strerror(errno)));
        if (n > 0) at += static_cast<std::size_t>(n);
    }
    std::string in;
    for (;;) {
        try {
            if (auto reply = take_message(in)) {
                if (!in.empty()) throw MalformedMessage("bytes after the reply");
                if (reply->tag == Tag::failed)
                    throw Error(fmt::format("mpify: the group's rendezvous store at {} says: {}", endpoint_.describe(),
                                            reply->fields.empty() ? "failed" : reply->fields[0]));
                if (reply->tag != Tag::ok) throw MalformedMessage("a reply that is neither ok nor failed");
                return std::move(*reply);
            }
        } catch (const MalformedMessage& e) {
            throw broken(fmt::format("sent a malformed reply ({})", e.what()));
        }
        await_socket(POLLIN, "did not answer");
        char chunk[65536];
        const ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, MSG_DONTWAIT);
        if (n == 0) throw broken("closed the connection");
        if (n < 0 && errno != EAGAIN && errno != EINTR) throw broken(fmt::format("is gone ({})", std::strerror(errno)));
        if (n > 0) in.append(chunk, static_cast<std::size_t>(n));
    }
}

Message Client::call(const Message& request) { return call(request, answer_margin); }

void Client::introduce(int number, int local_ranks, const std::string& host) {
    call({Tag::introduce, number, {host, std::to_string(local_ranks)}});
    introduced_ = true;
}

void Client::leave(bool failed, const std::string& note) {
    left_ = true;
    call({Tag::leave, failed ? 1 : 0, {note}});
}

std::vector<Member> Client::members() {
    try {
        return decode_members(call({Tag::members, 0, {}}).fields);
    } catch (const MalformedMessage& e) {
        throw Error(fmt::format("mpify: the group's rendezvous store at {} sent a malformed member list ({})",
                                endpoint_.describe(), e.what()));
    }
}

void Client::set(const std::string& key, const std::vector<uint8_t>& value) {
    call({Tag::set, 0, {key, as_string(value)}});
}

std::vector<uint8_t> Client::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                        const std::vector<uint8_t>& desired) {
    const Message reply = call({Tag::compare_set, 0, {key, as_string(expected), as_string(desired)}});
    if (reply.fields.size() != 1)
        throw Error("mpify: the group's rendezvous store answered compare_set without a value");
    return as_bytes(reply.fields[0]);
}

std::vector<uint8_t> Client::get(const std::string& key) {
    const std::chrono::milliseconds timeout = bounded(timeout_);
    const Message reply = call({Tag::get, timeout.count(), {key}}, timeout + answer_margin);
    if (reply.fields.size() != 1) throw Error("mpify: the group's rendezvous store answered get without a value");
    return as_bytes(reply.fields[0]);
}

int64_t Client::add(const std::string& key, int64_t value) { return call({Tag::add, value, {key}}).number; }

bool Client::deleteKey(const std::string& key) { return call({Tag::remove, 0, {key}}).number != 0; }

bool Client::check(const std::vector<std::string>& keys) { return call({Tag::check, 0, keys}).number != 0; }

int64_t Client::getNumKeys() { return call({Tag::count, 0, {}}).number; }

void Client::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void Client::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
    const std::chrono::milliseconds bounded_timeout = bounded(timeout);
    call({Tag::wait, bounded_timeout.count(), keys}, bounded_timeout + answer_margin);
}

std::vector<std::string> Client::exchange(const std::string& key, const std::string& value,
                                          const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
    const std::chrono::milliseconds bounded_timeout = bounded(timeout);
    std::vector<std::string> fields{key, value};
    fields.insert(fields.end(), keys.begin(), keys.end());
    Message reply = call({Tag::exchange, bounded_timeout.count(), std::move(fields)}, bounded_timeout + answer_margin);
    if (reply.fields.size() != keys.size())
        throw Error(fmt::format("mpify: the group's rendezvous store answered an exchange with {} values for {} keys",
                                reply.fields.size(), keys.size()));
    return std::move(reply.fields);
}

}  // namespace store
MPIFY_END_DETAIL_NAMESPACE
