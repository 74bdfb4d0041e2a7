// The caller's connect-back port (spawn/connect_back_listener.hpp) over real TCP on the
// loopback: remote ranks are admitted while strangers are still trying, strangers are
// closed by their patience, a flood cannot hold more than most_pending connections, and
// the port is never bound to every interface.
#include "common/clock.hpp"
#include "common/endpoint.hpp"
#include "common/posix.hpp"
#include "common/secret_handshake.hpp"
#include "spawn/connect_back_listener.hpp"

#include <mpify/error.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

using namespace mpify::detail;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {

UniqueFd connect_to_listener(const ConnectBackListener& listener) {
    Endpoint endpoint;
    endpoint.host = listener.address();
    endpoint.port = listener.port();
    return connect_to(endpoint, deadline_in(5s), []() noexcept { return false; });
}

// A remote worker of the test: connects and proves `rank`; true when the caller proved
// itself back.
std::future<bool> worker(const ConnectBackListener& listener, const CallSecret& secret, int rank) {
    return std::async(std::launch::async, [&listener, &secret, rank] {
        UniqueFd fd = connect_to_listener(listener);
        try {
            prove_to_caller(fd.get(), secret, rank, deadline_in(10s));
            return true;
        } catch (const HandshakeRefused&) {
            return false;
        }
    });
}

bool any_contains(const std::vector<std::string>& lines, const std::string& part) {
    for (const std::string& line : lines)
        if (line.find(part) != std::string::npos) return true;
    return false;
}

}  // namespace

TEST_CASE("remote ranks are admitted while strangers on the port are still trying", "[connect_back]") {
    ConnectBackListener listener("127.0.0.1", 0);
    const CallSecret secret = CallSecret::fresh(), others = CallSecret::fresh();
    const auto start = Clock::now();
    auto admission = std::async(std::launch::async, [&] {
        return listener.admit(secret, 4, {false, true, true, true}, deadline_in(20s), 15s);
    });
    // Strangers first: one says nothing, one a byte, one garbage, one another call's proof.
    UniqueFd silent = connect_to_listener(listener), slow = connect_to_listener(listener),
             garbage = connect_to_listener(listener);
    write_all(slow.get(), "M", 1, "a byte");
    const std::string junk(WorkerAdmission::answer_size, 'x');
    write_all(garbage.get(), junk.data(), junk.size(), "garbage");
    CHECK_FALSE(worker(listener, others, 1).get());  // refused: the caller hung up on it
    char challenge[40], more;
    CHECK(read_exact(garbage.get(), challenge, sizeof challenge, "challenge"));
    std::string refused(WorkerAdmission::refusal().size(), '\0');
    CHECK(read_exact(garbage.get(), refused.data(), refused.size(), "refusal"));
    CHECK(refused == WorkerAdmission::refusal());                  // refused, not cut
    CHECK_FALSE(read_exact(garbage.get(), &more, 1, "the end"));  // then closed
    // Then the ranks, while the silent and the slow stranger are still on the port.
    std::vector<std::future<bool>> workers;
    for (int rank : {1, 2, 3}) workers.push_back(worker(listener, secret, rank));
    auto admitted = admission.get();
    CHECK(Clock::now() - start < 10s);  // nobody waited for a stranger's patience (15 s)
    REQUIRE(admitted.size() == 3);
    for (int rank : {1, 2, 3}) CHECK(admitted.count(rank) == 1);
    for (auto& w : workers) CHECK(w.get());
    CHECK(any_contains(listener.refusals(), "not mpify's"));
    CHECK(any_contains(listener.refusals(), "does not prove the call's secret"));
    // The two still proving themselves were closed when admission ended: each got the
    // challenge and then the end of the connection.
    for (int fd : {silent.get(), slow.get()}) {
        CHECK(read_exact(fd, challenge, sizeof challenge, "challenge"));
        CHECK_FALSE(read_exact(fd, &more, 1, "the end"));
    }
}

TEST_CASE("a stranger sending a byte now and then is closed at its patience; a rank that never comes is missing",
          "[connect_back]") {
    ConnectBackListener listener("127.0.0.1", 0);
    const CallSecret secret = CallSecret::fresh();
    UniqueFd slow = connect_to_listener(listener);
    auto trickle = std::async(std::launch::async, [fd = slow.get()] {
        for (int i = 0; i < 40; ++i) {  // a slow client, simulated: a byte every 50 ms
            if (::send(fd, "M", 1, MSG_NOSIGNAL) != 1) return;
            std::this_thread::sleep_for(50ms);
        }
    });
    const auto admitted = listener.admit(secret, 2, {false, true}, deadline_in(1500ms), 300ms);
    CHECK(admitted.empty());
    CHECK(any_contains(listener.refusals(), "no proof within 300 ms"));
    trickle.get();
}

TEST_CASE("a flood of connections holds at most most_pending of them, the oldest go, and the rank gets in",
          "[connect_back]") {
    ConnectBackListener listener("127.0.0.1", 0);
    const CallSecret secret = CallSecret::fresh();
    std::vector<UniqueFd> flood;
    for (std::size_t i = 0; i < ConnectBackListener::most_pending + 6; ++i)
        flood.push_back(connect_to_listener(listener));
    auto rank1 = worker(listener, secret, 1);
    const auto admitted = listener.admit(secret, 2, {false, true}, deadline_in(20s), 15s);
    CHECK(admitted.count(1) == 1);
    CHECK(rank1.get());
    CHECK(any_contains(listener.refusals(), "connections were already proving themselves"));
}

TEST_CASE("the connect-back port is never bound to every interface", "[connect_back]") {
    for (const char* wildcard : {"0.0.0.0", "::", ""})
        CHECK_THROWS_WITH(ConnectBackListener(wildcard, 0), Contains("not to '") && Contains("every interface"));
    ConnectBackListener listener("127.0.0.1", 0);
    CHECK(listener.port() > 0);
}
