#pragma once
// The caller's one TCP port for the workers of a call that run on other machines: they
// connect back to it and prove their rank (common/secret_handshake.hpp) before anything
// else is said. It listens on one address — the caller's address on the route to the
// nodes — never on every interface, and admits many connections at once, so a stranger
// that connects and says nothing, or a byte a second, delays no worker: each connection
// has `patience` to prove itself, and at most `most_pending` wait at a time. A flood of
// connections cannot lock a worker out: at most `accepts_per_round` are accepted between
// two readings of the pending ones (a worker's proof is read before more come in); room
// for a newcomer is made by closing the oldest that has sent nothing at all, never one
// that has begun its proof (the newcomer is closed instead when every one has); and a
// worker whose handshake was cut connects again (worker/connect_back_worker.hpp).
#include "common/clock.hpp"
#include "common/poll_set.hpp"
#include "common/unique_fd.hpp"
#include "common/secret_handshake.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

class ConnectBackListener {
public:
    /// Connections waiting to prove themselves at most at once.
    static constexpr std::size_t most_pending = 64;
    /// Connections accepted at most between two readings of those pending.
    static constexpr std::size_t accepts_per_round = 256;
    /// Refusals kept for refusals() (the latest); refused_count() counts them all.
    static constexpr std::size_t most_refusals_kept = 16;

    /// Listens on `address` (numeric or a name; not a wildcard such as 0.0.0.0 or ::) at
    /// `port` (0: a free one). Throws UsageError saying why it cannot.
    ConnectBackListener(const std::string& address, int port);
    ~ConnectBackListener();
    ConnectBackListener(const ConnectBackListener&) = delete;
    ConnectBackListener& operator=(const ConnectBackListener&) = delete;

    const std::string& address() const { return address_; }
    int port() const { return port_; }

    /// Admits connections that prove a rank of a call of `world_size` ranks under
    /// `secret`, until every rank for which `wanted` is true has one or `deadline` has come.
    /// Returns the admitted connections by rank (blocking fds, the handshake done). A
    /// connection that fails to prove a rank within `patience` of its arrival, proves a
    /// rank not wanted or already admitted, or sends anything else is closed and noted in
    /// refusals(); the others go on.
    /// It also returns, with what it has admitted so far, as soon as one of
    /// `return_when_ready` is readable (a launcher that ended, an interrupt; -1: none) or
    /// `give_up` (asked at least every 100 ms when given) says so.
    std::map<int, UniqueFd> admit(const CallSecret& secret, int world_size, const std::vector<bool>& wanted,
                                  Clock::time_point deadline,
                                  std::chrono::milliseconds patience = std::chrono::seconds(5),
                                  const std::vector<int>& return_when_ready = {},
                                  const std::function<bool()>& give_up = {});

    /// Why the latest refused connections were closed, in order ("127.0.0.1: the answer
    /// is not mpify's"); at most most_refusals_kept. Never holds the secret or a proof.
    const std::vector<std::string>& refusals() const { return refusals_; }
    /// How many connections were refused in all.
    std::size_t refused_count() const { return refused_count_; }

private:
    struct Pending;
    struct Round;  // what admit() is after: the secret, the ranks wanted, those admitted
    // Accepts at most accepts_per_round of what waits on the port into `pending`, each
    // with the round's patience to prove itself.
    void accept_new(Round& round, std::vector<std::unique_ptr<Pending>>& pending);
    // Frees a place in `pending` (see the top of this file); false when none may go.
    bool make_room(Round& round, std::vector<std::unique_ptr<Pending>>& pending);
    // Reads what `pending` sent; true when it is done, admitted or refused.
    bool advance(Pending& pending, Round& round);
    void refuse(const Pending& pending, const std::string& why);

    std::string address_;
    int port_ = 0;
    UniqueFd listener_;
    std::vector<std::string> refusals_;
    std::size_t refused_count_ = 0;
};

MPIFY_END_DETAIL_NAMESPACE
