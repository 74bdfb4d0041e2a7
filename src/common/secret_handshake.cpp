#include "common/secret_handshake.hpp"

#include "common/byte_codec.hpp"
#include "common/exact_read.hpp"
#include "common/posix.hpp"

#include <mpify/error.hpp>

#include <sodium.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

constexpr std::string_view magic = "MPIFYCB1";
constexpr std::size_t nonce_size = 32;
constexpr std::size_t proof_size = crypto_auth_hmacsha256_BYTES;
static_assert(CallSecret::size == crypto_auth_hmacsha256_KEYBYTES);

constexpr std::size_t challenge_size = magic.size() + nonce_size;
constexpr std::size_t answer_bytes = magic.size() + nonce_size + 4 + proof_size;

void start_sodium() {
    if (sodium_init() < 0) throw Error("mpify: libsodium could not start (no random source?)");
}

std::string random_nonce() {
    std::string nonce(nonce_size, '\0');
    randombytes_buf(nonce.data(), nonce.size());
    return nonce;
}

std::string rank_bytes(int rank) {
    ByteWriter writer;
    writer.u32(static_cast<std::uint32_t>(rank));
    return writer.take();
}

// HMAC-SHA256 under the secret of `role` ("mpify worker" or "mpify caller") followed by
// the fields, in order.
std::string proof(const CallSecret& secret, std::string_view role, const std::string& first_nonce,
                  const std::string& second_nonce, const std::string& rank) {
    crypto_auth_hmacsha256_state state;
    crypto_auth_hmacsha256_init(&state, secret.data(), CallSecret::size);
    for (std::string_view part :
         {role, std::string_view(first_nonce), std::string_view(second_nonce), std::string_view(rank)})
        crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(part.data()), part.size());
    std::string out(proof_size, '\0');
    crypto_auth_hmacsha256_final(&state, reinterpret_cast<unsigned char*>(out.data()));
    sodium_memzero(&state, sizeof state);
    return out;
}

bool same_proof(const std::string& a, const std::string& b) {
    return a.size() == proof_size && b.size() == proof_size && sodium_memcmp(a.data(), b.data(), proof_size) == 0;
}

// Exactly `size` bytes by `deadline`; HandshakeRefused naming `what` otherwise.
std::string read_by(int fd, std::size_t size, Clock::time_point deadline, const char* what) {
    std::string bytes(size, '\0');
    const ExactRead read = read_exact_until(fd, bytes.data(), size, deadline);
    switch (read.kind) {
        case ExactRead::complete: break;
        case ExactRead::timed_out:
            throw HandshakeRefused(std::string("no complete ") + what + " in time (" + std::to_string(read.have) +
                                   " of " + std::to_string(size) + " bytes)");
        case ExactRead::end_of_file: throw HandshakeCut(std::string("the connection closed during the ") + what);
        case ExactRead::failed:
            throw HandshakeCut(std::string("reading the ") + what + " failed: " + std::strerror(read.error_number));
    }
    return bytes;
}

// Sends all of `bytes`; HandshakeRefused naming `what` when the peer is gone (it may hang
// up before even the challenge is written) or the write fails.
void send(int fd, const std::string& bytes, const char* what) {
    try {
        write_all(fd, bytes.data(), bytes.size(), what);
    } catch (const std::system_error& e) {
        if (e.code().value() == EPIPE || e.code().value() == ECONNRESET)
            throw HandshakeCut(std::string("the connection closed during the ") + what);
        throw HandshakeRefused(e.what());
    } catch (const std::exception& e) {
        throw HandshakeRefused(e.what());
    }
}

}  // namespace

CallSecret CallSecret::fresh() {
    start_sodium();
    CallSecret secret;
    randombytes_buf(secret.bytes_.data(), secret.bytes_.size());
    return secret;
}

CallSecret CallSecret::from_hex(std::string_view text) {
    CallSecret secret;
    std::size_t written = 0;
    const char* end = nullptr;
    if (text.size() != 2 * size ||
        sodium_hex2bin(secret.bytes_.data(), size, text.data(), text.size(), nullptr, &written, &end) != 0 ||
        written != size || end != text.data() + text.size())
        throw std::invalid_argument("the call's secret is not 64 hexadecimal digits");
    return secret;
}

CallSecret::~CallSecret() { sodium_memzero(bytes_.data(), bytes_.size()); }

std::string CallSecret::hex() const {
    std::string text(2 * size + 1, '\0');
    sodium_bin2hex(text.data(), text.size(), bytes_.data(), bytes_.size());
    text.pop_back();
    return text;
}

const std::size_t WorkerAdmission::answer_size = answer_bytes;

std::string WorkerAdmission::refusal() {
    std::string refused = std::string(magic) + " refused";
    refused.resize(proof_size, '\0');
    return refused;
}

WorkerAdmission::WorkerAdmission(const CallSecret& secret)
    : secret_(secret), nonce_((start_sodium(), random_nonce())), challenge_(std::string(magic) + nonce_) {}

int WorkerAdmission::check(std::string_view answer, int world_size) {
    if (answer.size() != answer_bytes || answer.compare(0, magic.size(), magic) != 0)
        throw HandshakeRefused("the answer is not mpify's");
    ByteReader<HandshakeRefused> reader(answer.substr(magic.size()), "the answer");
    const std::string worker_nonce(reader.bytes(nonce_size, "nonce"));
    const std::uint32_t rank = reader.u32("rank");
    const std::string claimed(reader.bytes(proof_size, "proof"));
    const std::string rank_field = rank_bytes(static_cast<int>(rank));
    if (!same_proof(claimed, proof(secret_, "mpify worker", nonce_, worker_nonce, rank_field)))
        throw HandshakeRefused("the answer does not prove the call's secret");
    if (rank >= static_cast<std::uint32_t>(world_size))
        throw HandshakeRefused("the proven rank " + std::to_string(rank) + " is not in the call");
    caller_proof_ = proof(secret_, "mpify caller", worker_nonce, nonce_, rank_field);
    return static_cast<int>(rank);
}

int admit_worker(int fd, const CallSecret& secret, int world_size, Clock::time_point deadline) {
    WorkerAdmission admission(secret);
    send(fd, admission.challenge(), "challenge");
    const int rank = admission.check(read_by(fd, answer_bytes, deadline, "answer to the challenge"), world_size);
    send(fd, admission.caller_proof(), "caller's proof");
    return rank;
}

void prove_to_caller(int fd, const CallSecret& secret, int rank, Clock::time_point deadline) {
    start_sodium();
    const std::string challenge = read_by(fd, challenge_size, deadline, "challenge");
    if (challenge.compare(0, magic.size(), magic) != 0) throw HandshakeRefused("the challenge is not mpify's");
    const std::string caller_nonce = challenge.substr(magic.size());
    const std::string worker_nonce = random_nonce();
    const std::string rank_field = rank_bytes(rank);
    send(fd,
         std::string(magic) + worker_nonce + rank_field +
             proof(secret, "mpify worker", caller_nonce, worker_nonce, rank_field),
         "answer");
    const std::string caller_proof = read_by(fd, proof_size, deadline, "caller's proof");
    if (caller_proof == WorkerAdmission::refusal())
        throw HandshakeRefused("the caller refused this worker's proof (a secret or rank of another call)");
    if (!same_proof(caller_proof, proof(secret, "mpify caller", worker_nonce, caller_nonce, rank_field)))
        throw HandshakeRefused("the other end does not prove the call's secret: it is not this worker's caller");
}

MPIFY_END_DETAIL_NAMESPACE
