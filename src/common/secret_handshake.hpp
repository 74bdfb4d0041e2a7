#pragma once
// How a worker on another machine and its caller prove to each other that they belong to
// the same call, over the TCP connection the worker makes back to the caller, before
// anything else travels on it. The rendezvous store of a group with ranks on other
// machines uses the same proof, under a secret of its own, for every connection
// (store/server.hpp); there "worker" is the store's client and "caller" the store.
//
// Each call has a fresh 256-bit secret (CallSecret). It reaches the remote workers in the
// launcher's environment (never argv, a log or an error message). Both sides prove they
// hold it without sending it, each over a nonce of the other's, so a recorded exchange
// cannot be replayed:
//
//   caller -> worker   "MPIFYCB1" | caller nonce (32 bytes)
//   worker -> caller   "MPIFYCB1" | worker nonce (32) | rank (u32, little-endian)
//                      | HMAC-SHA256(secret, "mpify worker" | caller nonce | worker nonce | rank)
//   caller -> worker   HMAC-SHA256(secret, "mpify caller" | worker nonce | caller nonce | rank)
//                      or, for an answer it refuses, "MPIFYCB1 refused" padded with zero
//                      bytes to the same 32 (then it hangs up)
//
// A connection closed before the third message without the refusal was cut (the caller
// made room in a flood of connections): the worker may connect again.
//
// Every message has a fixed size, so a stranger can make neither side wait for more than
// that or past the deadline; proofs are checked in constant time. Random bytes and
// HMAC come from libsodium.
#include "common/clock.hpp"

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// The environment variable that carries a call's secret (hex) to its remote workers.
constexpr const char* connect_secret_env_var = "MPIFY_CONNECT_SECRET";

/// A call's secret: 32 random bytes. Wiped from memory when destroyed.
class CallSecret {
public:
    static constexpr std::size_t size = 32;

    /// A fresh secret from the kernel's random source (through libsodium). Throws Error
    /// when libsodium cannot start.
    static CallSecret fresh();
    /// The secret written by hex(). Throws std::invalid_argument, without the text, when
    /// it is not 64 hexadecimal digits.
    static CallSecret from_hex(std::string_view text);

    CallSecret(const CallSecret& other) = default;
    CallSecret& operator=(const CallSecret& other) = default;
    ~CallSecret();

    /// 64 lowercase hexadecimal digits, for the launcher's environment only.
    std::string hex() const;
    const unsigned char* data() const { return bytes_.data(); }

private:
    CallSecret() = default;
    std::array<unsigned char, size> bytes_{};
};

/// Why a connection was not admitted: no proof, a wrong one, garbage, or too slow.
/// The message never holds the secret or a proof.
class HandshakeRefused : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// The connection closed or failed in the middle of the handshake — the other end hung
/// up (a caller making room in a flood of connections closes the oldest silent ones) —
/// rather than refused a proof: worth trying again on a new connection.
class HandshakeCut : public HandshakeRefused {
public:
    using HandshakeRefused::HandshakeRefused;
};

/// The caller's side of one connection, in steps, for a loop that admits many at once:
/// send challenge(), read answer_size bytes, check() them, send caller_proof().
class WorkerAdmission {
public:
    /// Bytes of the worker's answer.
    static const std::size_t answer_size;

    /// A fresh challenge under `secret`, which must outlive this object.
    explicit WorkerAdmission(const CallSecret& secret);
    /// What the caller sends first.
    const std::string& challenge() const { return challenge_; }
    /// Checks a whole answer; returns the rank it proves (in [0, world_size)), after which
    /// caller_proof() is what to send back. Throws HandshakeRefused.
    int check(std::string_view answer, int world_size);
    /// The caller's proof for the answer check() accepted.
    const std::string& caller_proof() const { return caller_proof_; }
    /// What the caller sends instead of its proof for an answer it refuses.
    static std::string refusal();

private:
    const CallSecret& secret_;
    std::string nonce_;
    std::string challenge_;
    std::string caller_proof_;
};

/// The caller's side, on a connection it accepted: challenges the peer, checks its proof
/// and answers with its own (WorkerAdmission, blocking). Returns the rank the peer proved (in [0, world_size)).
/// Throws HandshakeRefused when the peer fails to prove one by `deadline`.
int admit_worker(int fd, const CallSecret& secret, int world_size, Clock::time_point deadline);

/// The worker's side, on its connection to the caller: answers the challenge for `rank`
/// and checks the caller's proof. Throws HandshakeRefused when the other end does not
/// prove it is the caller by `deadline`.
void prove_to_caller(int fd, const CallSecret& secret, int rank, Clock::time_point deadline);

MPIFY_END_DETAIL_NAMESPACE
