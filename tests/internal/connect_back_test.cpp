// The connect-back handshake (common/secret_handshake.hpp) on socket pairs: a worker and
// its caller admit each other; strangers — no secret, a wrong one, garbage, a rank
// outside the call, bytes that stop coming — are refused by the deadline, and an
// impostor caller is refused by the worker.
#include "common/clock.hpp"
#include "common/posix.hpp"
#include "common/unique_fd.hpp"
#include "common/secret_handshake.hpp"

#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <chrono>
#include <future>
#include <string>
#include <utility>

using namespace mpify::detail;
using Catch::Matchers::Contains;

namespace {

std::pair<UniqueFd, UniqueFd> connected_pair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// What admit_worker says of a peer that runs `peer` on its end and then hangs up; the
// caller's end closes once admit_worker has returned or thrown.
template <class Peer>
std::string refusal_of(Peer peer, std::chrono::milliseconds patience = std::chrono::seconds(5)) {
    auto [caller_end, peer_end] = connected_pair();
    auto peer_done = std::async(std::launch::async, [&peer, fd = std::move(peer_end)]() mutable {
        peer(fd.get());
        fd.reset();
    });
    std::string refusal;
    try {
        admit_worker(caller_end.get(), CallSecret::fresh(), 4, deadline_in(patience));
    } catch (const HandshakeRefused& e) {
        refusal = e.what();
    }
    caller_end.reset();
    peer_done.get();
    return refusal;
}

}  // namespace

TEST_CASE("a worker and its caller admit each other, and the caller learns the proven rank", "[connect_back]") {
    const CallSecret secret = CallSecret::fresh();
    auto [caller_end, worker_end] = connected_pair();
    auto worker = std::async(std::launch::async, [&secret, fd = worker_end.get()] {
        prove_to_caller(fd, secret, 3, deadline_in(std::chrono::seconds(5)));
    });
    CHECK(admit_worker(caller_end.get(), secret, 4, deadline_in(std::chrono::seconds(5))) == 3);
    CHECK_NOTHROW(worker.get());
}

TEST_CASE("a worker with another call's secret is refused, and so is its caller by it", "[connect_back]") {
    const CallSecret others = CallSecret::fresh();
    std::string worker_refusal;
    const std::string refusal = refusal_of([&](int fd) {
        try {
            prove_to_caller(fd, others, 1, deadline_in(std::chrono::seconds(5)));
        } catch (const HandshakeRefused& e) {
            worker_refusal = e.what();
        }
    });
    CHECK_THAT(refusal, Contains("does not prove the call's secret"));
    CHECK_THAT(worker_refusal, Contains("closed"));  // the caller hung up without its proof
}

TEST_CASE("garbage of the answer's size is refused", "[connect_back]") {
    const std::string refusal = refusal_of([](int fd) {
        char ignored[64];
        (void)read_exact(fd, ignored, 40, "challenge");
        const std::string garbage(76, 'x');
        write_all(fd, garbage.data(), garbage.size(), "garbage");
    });
    CHECK_THAT(refusal, Contains("not mpify's"));
}

TEST_CASE("a peer that stops sending part-way is refused at the deadline, not later", "[connect_back]") {
    const auto start = Clock::now();
    const std::string refusal = refusal_of(
        [](int fd) {
            char challenge[40];
            REQUIRE(read_exact(fd, challenge, sizeof challenge, "challenge"));
            const std::string start_of_answer = "MPIFYCB1" + std::string(10, '\0');
            write_all(fd, start_of_answer.data(), start_of_answer.size(), "a part");
            char rest;
            (void)read_exact(fd, &rest, 1, "the caller's hang-up");  // holds on until the caller gives up
        },
        std::chrono::milliseconds(300));
    CHECK_THAT(refusal, Contains("no complete answer to the challenge in time (18 of 76 bytes)"));
    CHECK(Clock::now() - start < std::chrono::seconds(3));
}

TEST_CASE("a peer that says nothing and hangs up is refused at once", "[connect_back]") {
    const std::string refusal = refusal_of([](int) {});
    CHECK_THAT(refusal, Contains("the connection closed during the"));  // the challenge or the answer
}

TEST_CASE("a rank outside the call is refused even with the right proof", "[connect_back]") {
    const CallSecret secret = CallSecret::fresh();
    auto [caller_end, worker_end] = connected_pair();
    auto worker = std::async(std::launch::async, [&secret, fd = worker_end.get()] {
        try {
            prove_to_caller(fd, secret, 4, deadline_in(std::chrono::seconds(5)));
        } catch (const HandshakeRefused&) {
        }
    });
    CHECK_THROWS_WITH(admit_worker(caller_end.get(), secret, 4, deadline_in(std::chrono::seconds(5))),
                      Contains("rank 4 is not in the call"));
    caller_end.reset();
    worker.get();
}

TEST_CASE("a worker refuses an impostor that does not know the secret", "[connect_back]") {
    const CallSecret secret = CallSecret::fresh(), impostors = CallSecret::fresh();
    auto [impostor_end, worker_end] = connected_pair();
    // The impostor hangs up once it has refused the worker's proof (its end goes with it).
    auto impostor = std::async(std::launch::async, [&impostors, fd = std::move(impostor_end)]() mutable {
        try {
            admit_worker(fd.get(), impostors, 4, deadline_in(std::chrono::seconds(5)));
        } catch (const HandshakeRefused&) {
        }
        fd.reset();
    });
    std::string refusal;
    try {
        prove_to_caller(worker_end.get(), secret, 0, deadline_in(std::chrono::seconds(5)));
    } catch (const HandshakeRefused& e) {
        refusal = e.what();
    }
    impostor.get();
    // The impostor refused the worker's proof and hung up: the worker never got one back.
    CHECK_THAT(refusal, Contains("closed during the caller's proof"));
}

TEST_CASE("a call's secret is 64 hex digits, read back as written, and other text is refused without echo",
          "[connect_back]") {
    const CallSecret secret = CallSecret::fresh();
    const std::string hex = secret.hex();
    CHECK(hex.size() == 64);
    CHECK(CallSecret::from_hex(hex).hex() == hex);
    CHECK(CallSecret::fresh().hex() != hex);
    const std::string not_hex = "zz" + hex.substr(2);
    CHECK_THROWS_WITH(CallSecret::from_hex(not_hex), !Contains("zz") && Contains("64 hexadecimal digits"));
    CHECK_THROWS_AS(CallSecret::from_hex(hex.substr(1)), std::invalid_argument);
}
