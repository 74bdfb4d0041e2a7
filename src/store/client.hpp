#pragma once
// A connection to a group's rendezvous store, as the c10d::Store that Gloo and the
// rendezvous use. Every operation ends by its deadline whatever the other end does (or
// does not) send: a get or wait is timed by the store and answered "timed out", and a
// store that stops answering is given up on a second later.
#include "common/endpoint.hpp"
#include "common/secret_handshake.hpp"
#include "store/member.hpp"
#include "store/message.hpp"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <mutex>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace store {

class Client final : public c10d::Store {
public:
    /// When a client first connects: as it is made, or at its first request (a group
    /// that may never need its store: the connection costs nothing until it does).
    enum class Connect { now, at_first_use };

    /// Connects to `endpoint` (now, or at the first request: `when`), retrying while
    /// nothing listens there until `timeout`, which is also how long each get and wait may
    /// take; any wait ends early once `interrupted` says so. With a `secret`, every
    /// connection first proves it to the store (and checks the store's proof). Throws Error.
    Client(Endpoint endpoint, std::chrono::milliseconds timeout, InterruptCheck interrupted,
           std::optional<CallSecret> secret = std::nullopt, Connect when = Connect::now);
    /// Says goodbye (a clean end) if introduced and not yet gone.
    ~Client() override;

    /// Tells the store who this connection is: the caller of ranks number .. number +
    /// local_ranks - 1, on `host` (see member.hpp).
    void introduce(int number, int local_ranks, const std::string& host);
    /// Tells the store this member ends: cleanly, or after the failure `note`.
    void leave(bool failed, const std::string& note);
    /// Everyone the store has heard from.
    std::vector<Member> members();
    const Endpoint& endpoint() const { return endpoint_; }

    /// This client itself: it is safe to use from several threads. LibTorch 2.x's Store
    /// declares clone() (pure virtual) and this overrides it; 1.13's has none (hence no
    /// `override`).
    c10::intrusive_ptr<c10d::Store> clone() { return c10::intrusive_ptr<c10d::Store>::reclaim_copy(this); }

    void set(const std::string& key, const std::vector<uint8_t>& value) override;
    std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                    const std::vector<uint8_t>& desired) override;
    std::vector<uint8_t> get(const std::string& key) override;
    int64_t add(const std::string& key, int64_t value) override;
    bool deleteKey(const std::string& key) override;
    bool check(const std::vector<std::string>& keys) override;
    int64_t getNumKeys() override;
    void wait(const std::vector<std::string>& keys) override;
    void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
    /// Sets `key` to `value`, then waits (up to `timeout`) until all of `keys` exist and
    /// returns their values, in order: a rendezvous round in one round trip to the store.
    std::vector<std::string> exchange(const std::string& key, const std::string& value,
                                      const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

private:
    /// Sends `request` and returns the reply (Tag::ok); throws Error on a "failed" reply,
    /// a broken connection, or no reply within `patience`.
    Message call(const Message& request, std::chrono::milliseconds patience);
    Message call(const Message& request);
    /// A new connection to the store, proven when it has a secret.
    UniqueFd connect(Clock::time_point deadline) const;

    Endpoint endpoint_;
    InterruptCheck interrupted_;
    std::optional<CallSecret> secret_;
    std::mutex mutex_;  ///< one request at a time on the connection
    UniqueFd fd_;
    bool introduced_ = false;
    bool left_ = false;
};

/// A store value as text, and text as a store value (c10d's stores hold bytes).
std::string as_string(const std::vector<uint8_t>& bytes);
std::vector<uint8_t> as_bytes(const std::string& text);

}  // namespace store
MPIFY_END_DETAIL_NAMESPACE
