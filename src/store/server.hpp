#pragma once
// The rendezvous store of one group, served from a thread of the process that hosts it
// (the caller with base_rank 0). It keeps the keys the ranks and Gloo exchange, answers
// get/wait when their keys arrive or their timeout passes, and records its members.
//
// Whoever can connect can send anything: a malformed or oversized message closes that
// connection only; no allocation exceeds the bytes received; a connection that does not
// read its replies is closed when they pile up.
#include "store/endpoint.hpp"
#include "store/member.hpp"

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mpify::detail::store {

class Server {
public:
    /// Listens at `endpoint` (a free port when its TCP port is 0: see endpoint()) and
    /// starts serving. Throws UsageError when it cannot listen there.
    explicit Server(Endpoint endpoint);
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
    void serve();

    Endpoint endpoint_;
    UniqueFd listener_;
    UniqueFd wake_;  ///< an eventfd: the destructor's "stop"
    std::unique_ptr<State> state_;
    mutable std::mutex members_mutex_;
    std::vector<Member> members_;  ///< guarded by members_mutex_
    std::thread thread_;
};

}  // namespace mpify::detail::store
