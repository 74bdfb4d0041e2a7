#pragma once
// The rendezvous store of one group, served from a thread of the process that hosts it
// (the caller with base_rank 0). It keeps the keys the ranks and Gloo exchange, answers
// get/wait when their keys arrive or their timeout passes, and records its members.
//
// Whoever can connect can send anything: a malformed or oversized message closes that
// connection only; no allocation exceeds the bytes received; a connection that does not
// read its replies is closed when they pile up. And whoever can connect can connect
// often: the store keeps at most a quarter of the process's file descriptors (a
// newcomer takes the place of a connection that has not sent a request yet), gives
// such an unproven connection 64 KiB and 30 s to send one, holds 64 MiB of messages in
// all (beyond, the connection holding most is dropped) and stores 256 MiB of keys.
//
// A store with a secret (a group whose ranks run on other machines, on a routed address)
// first has each connection prove it holds the secret (common/secret_handshake.hpp's
// challenge, HMAC both ways) and serves nothing before; a wrong proof drops it.
#include "common/clock.hpp"
#include "common/event_fd.hpp"
#include "common/endpoint.hpp"
#include "common/secret_handshake.hpp"
#include "store/member.hpp"
#include "store/message.hpp"

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace store {

class Server {
public:
    /// Listens at `endpoint` (a free port when its TCP port is 0: see endpoint()) and
    /// starts serving; with a `secret`, only connections that prove it. Throws UsageError
    /// when it cannot listen there.
    explicit Server(Endpoint endpoint, std::optional<CallSecret> secret = std::nullopt);
    /// Stops serving and closes every connection.
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    /// Where it listens, with the port the kernel chose.
    const Endpoint& endpoint() const { return endpoint_; }
    /// Everyone who introduced themselves, and what became of them.
    std::vector<Member> members() const;

private:
    struct Connection;
    struct State;

    /// The serving thread: poll, exchange bytes, accept, until the destructor says stop.
    void serve();
    /// Answers the waiting gets and waits whose keys came or whose time ran out, and runs
    /// what those connections sent meanwhile, as of `now`. Returns when the next one
    /// times out.
    Clock::time_point settle_blocked(Clock::time_point now);
    /// Sends and receives what `events` allow; false when the connection must be dropped
    /// (closed, malformed, or letting replies pile up).
    bool exchange(Connection& c, short events);
    /// Accepts a connection, within the limit on connections (see above).
    void accept_one();
    void drop(std::size_t index);
    /// Drops unproven connections past their time, then, while every connection together
    /// holds too much, the one that holds most.
    void drop_what_overflows(Clock::time_point now);
    std::optional<std::size_t> oldest_unproven() const;
    /// Stores `value` under `key`, unless that takes the store past its limit.
    bool store_value(const std::string& key, std::string value);
    static std::string store_full();
    /// Runs the requests a connection has received, up to one that has to wait. Throws
    /// MalformedMessage.
    void process(Connection& c);
    /// The reply to one request; nullopt for a get, wait or exchange that has to wait.
    std::optional<Message> handle(Connection& c, Message m);
    Message introduce(Connection& c, const Message& m);
    /// Whether every key in [first, last) is stored.
    bool has_all(std::vector<std::string>::const_iterator first, std::vector<std::string>::const_iterator last) const;
    /// A get, wait or exchange whose awaited keys are all there: its reply. Otherwise nullopt.
    std::optional<Message> answer_if_ready(const Message& m) const;
    void set_member_state(Connection& c, Member::State state, std::string note);

    /// Checks a connection's proof of the secret once its whole answer is in; throws
    /// MalformedMessage when it is wrong.
    void admit(Connection& c);

    Endpoint endpoint_;
    std::optional<CallSecret> secret_;
    UniqueFd listener_;
    EventFd wake_{"the store's stop"};  ///< the destructor's "stop"
    std::unique_ptr<State> state_;
    mutable std::mutex members_mutex_;
    std::vector<Member> members_;  ///< guarded by members_mutex_
    std::thread thread_;
};

}  // namespace store
MPIFY_END_DETAIL_NAMESPACE
