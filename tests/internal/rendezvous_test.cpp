// The rendezvous and its store, without processes: a real store server on a UNIX socket
// or on loopback, its clients, and outsiders that send what they like.
#include "ddp/rendezvous.hpp"
#include "store/message.hpp"
#include "store/server.hpp"

#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using Catch::Contains;
namespace store = mpify::detail::store;
using mpify::detail::connect_to;
using mpify::detail::Endpoint;
using mpify::detail::listen_at;
using mpify::detail::private_socket_name;

namespace {

// The store is asked whether to give up waiting; these tests are never interrupted.
bool never_interrupted() noexcept { return false; }

using Clock = std::chrono::steady_clock;

Endpoint loopback() {
    Endpoint e;
    e.host = "127.0.0.1";
    return e;
}

mpify::detail::DdpSettings settings_for(const Endpoint& e, int rank, int world, int timeout_ms) {
    mpify::detail::DdpSettings s;
    s.rank = rank;
    s.world_size = world;
    s.store = e.text();
    s.timeout = std::chrono::milliseconds(timeout_ms);
    return s;
}

// A raw connection to the server, for sending what no client would.
mpify::detail::UniqueFd outsider(const Endpoint& e) {
    return connect_to(e, Clock::now() + std::chrono::seconds(5), never_interrupted);
}

void send_bytes(int fd, const std::string& bytes) {
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
}

// What the server does with a connection after the bytes sent: true when it closed it.
bool closed_by_server(int fd) {
    char c;
    return ::recv(fd, &c, 1, 0) == 0;  // blocks until the server answers or closes
}

}  // namespace

TEST_CASE("store messages decode to what was encoded and refuse anything malformed", "[store]") {
    const store::Message m{store::Tag::compare_set, -42, {"key", std::string("\0v\xff", 3), ""}};
    std::string buffer = store::encode(m) + store::encode(store::Message{store::Tag::count, 7, {}});
    auto first = store::take_message(buffer);
    REQUIRE(first);
    CHECK(first->tag == store::Tag::compare_set);
    CHECK(first->number == -42);
    CHECK(first->fields == m.fields);
    CHECK(store::take_message(buffer)->number == 7);
    CHECK(buffer.empty());

    const std::string body = store::encode(m).substr(4);
    CHECK_THROWS_WITH(store::decode_body(body + "x"), Contains("1 bytes after its last field"));
    CHECK_THROWS_WITH(store::decode_body(body.substr(0, body.size() - 1)), Contains("needs"));
    CHECK_THROWS_WITH(store::decode_body(std::string("\x63") + std::string(12, '\0')),
                      Contains("unknown store message tag 99"));
    // 2^32-1 fields announced in a 13-byte body: refused before anything is reserved.
    CHECK_THROWS_WITH(store::decode_body(std::string(9, '\3') + std::string(4, '\xff')), Contains("fields in 0 bytes"));
    std::string huge = "\xff\xff\xff\x7f";  // 2 GiB announced
    CHECK_THROWS_WITH(store::take_message(huge), Contains("the limit is"));
}

TEST_CASE("a rank that never joins is named when the timeout runs out", "[store][ddp][failure]") {
    Endpoint e = loopback();
    const store::Server server(e);
    auto rank1 = mpify::detail::connect_store(settings_for(server.endpoint(), 1, 3, 600));
    rank1->set("mpify/joined/1", {1});
    auto rank0 = mpify::detail::connect_store(settings_for(server.endpoint(), 0, 3, 600));
    const auto start = Clock::now();
    CHECK_THROWS_WITH(mpify::detail::wait_for_all(*rank0, settings_for(server.endpoint(), 0, 3, 600), "joined",
                                                  "did not join the group"),
                      Contains("rank(s) 2 did not join the group at 127.0.0.1:"));
    CHECK(Clock::now() - start < std::chrono::seconds(3));
}

TEST_CASE("a store that goes away during a round is reported at once, with what happened", "[store][ddp][failure]") {
    auto server = std::make_unique<store::Server>(loopback());
    const Endpoint at = server->endpoint();
    auto rank0 = mpify::detail::connect_store(settings_for(at, 0, 2, 5000));
    rank0->set("mpify/joined/0", {1});  // connected
    server.reset();
    const auto start = Clock::now();
    CHECK_THROWS_WITH(mpify::detail::wait_for_all(*rank0, settings_for(at, 0, 2, 5000), "joined",
                                                  "did not join the group"),
                      Contains("did not join the group") && Contains(" ms: mpify: the group's rendezvous store at") &&
                          !Contains("within 5000 ms"));
    CHECK(Clock::now() - start < std::chrono::seconds(3));
}

TEST_CASE("a round of reports gives every rank every rank's report, by rank, whoever comes last", "[store][ddp]") {
    Endpoint e;
    e.unix_path = private_socket_name();
    const store::Server server(e);
    constexpr int world = 3;
    std::vector<std::vector<std::string>> seen(world);
    std::vector<std::thread> ranks;
    for (int rank = world - 1; rank >= 0; --rank) {  // the last rank first: it waits for the others
        ranks.emplace_back([&, rank] {
            const auto s = settings_for(server.endpoint(), rank, world, 5000);
            auto client = mpify::detail::connect_store(s);
            seen[static_cast<std::size_t>(rank)] = mpify::detail::gather_reports(
                *client, s, "opened", rank == 1 ? "" : "pid " + std::to_string(rank), "did not open it");
        });
    }
    for (std::thread& t : ranks) t.join();
    const std::vector<std::string> expected{"pid 0", "", "pid 2"};
    for (int rank = 0; rank < world; ++rank) CHECK(seen[static_cast<std::size_t>(rank)] == expected);

    // An exchange sets its key before it waits: its own key counts among those awaited.
    store::Client client(server.endpoint(), std::chrono::seconds(5), never_interrupted);
    CHECK(client.exchange("alone/0", "here", {"alone/0"}, std::chrono::seconds(1)) == std::vector<std::string>{"here"});
    CHECK(store::as_string(client.get("mpify/opened/2")) == "#pid 2");
}

TEST_CASE("outsiders' bytes close their own connection and leave the group's rendezvous working", "[store][failure]") {
    Endpoint e;
    e.unix_path = private_socket_name();
    const store::Server server(e);
    auto silent = outsider(e);
    send_bytes(silent.get(), "x");  // one byte, then nothing: a half message
    auto greedy = outsider(e);
    send_bytes(greedy.get(), std::string("\xff\xff\xff\x7f", 4));  // announces 2 GiB
    CHECK(closed_by_server(greedy.get()));
    auto junk = outsider(e);
    send_bytes(junk.get(), store::encode(store::Message{store::Tag::set, 0, {"k", "v"}}).substr(0, 4) +
                               std::string(30, '\x01'));  // a length whose body is garbage
    CHECK(closed_by_server(junk.get()));

    // Two ranks of a group meet as if nothing happened.
    auto rank0 = mpify::detail::connect_store(settings_for(e, 0, 2, 5000));
    auto rank1 = mpify::detail::connect_store(settings_for(e, 1, 2, 5000));
    rank1->set("mpify/joined/1", {1});
    mpify::detail::wait_for_all(*rank0, settings_for(e, 0, 2, 5000), "joined", "did not join the group");
    CHECK(rank0->get("mpify/joined/1") == std::vector<uint8_t>{1});
    CHECK(rank0->compareSet("shape", {}, {4}) == std::vector<uint8_t>{4});
    CHECK(rank1->compareSet("shape", {}, {6}) == std::vector<uint8_t>{4});
    CHECK(rank1->add("counter", 3) == 3);
    CHECK(rank0->add("counter", 2) == 5);
    CHECK(rank0->deleteKey("counter"));
    CHECK_FALSE(rank0->check({"counter"}));
}

TEST_CASE("a store that never answers cannot hold a wait past its timeout", "[store][failure]") {
    // A listening socket nobody serves: the connection is accepted by the kernel, and
    // no reply ever comes.
    Endpoint e;
    e.unix_path = private_socket_name();
    const auto listener = listen_at(e);
    store::Client client(e, std::chrono::milliseconds(300), never_interrupted);
    const auto start = Clock::now();
    CHECK_THROWS_WITH(client.wait({"never"}, std::chrono::milliseconds(300)), Contains("did not answer within"));
    CHECK(Clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("the store tells a caller that left from one whose connection died", "[store]") {
    Endpoint e = loopback();
    const store::Server server(e);
    {
        store::Client clean(server.endpoint(), std::chrono::seconds(5), never_interrupted);
        clean.introduce(0, 2, "a");
    }  // says goodbye
    {
        // Introduced over a raw connection that then closes, as when its process is
        // SIGKILLed: no goodbye.
        auto killed = outsider(server.endpoint());
        send_bytes(killed.get(), store::encode(store::Message{store::Tag::introduce, 2, {"b", "2"}}));
        char reply[64];
        REQUIRE(::recv(killed.get(), reply, sizeof reply, 0) > 0);
    }
    store::Client observer(server.endpoint(), std::chrono::seconds(5), never_interrupted);
    observer.introduce(4, 2, "c");
    const auto members = observer.members();
    REQUIRE(members.size() == 3);
    CHECK(members[0].state == store::Member::State::left);
    CHECK(members[0].host == "a (127.0.0.1)");
    CHECK(members[1].state == store::Member::State::gone);
    CHECK(members[2].state == store::Member::State::present);
    CHECK(mpify::detail::hosts_of({2, 3, 6}, members) ==
          " (6 from a machine the store has not heard from; 2, 3 on b (127.0.0.1) (its caller is gone))");
}

TEST_CASE("a caller's connection that dies wakes a wait for a silent departure, a goodbye does not", "[store]") {
    Endpoint e = loopback();
    const store::Server server(e);
    store::Client observer(server.endpoint(), std::chrono::seconds(5), never_interrupted);
    observer.introduce(0, 2, "a");
    {
        store::Client clean(server.endpoint(), std::chrono::seconds(5), never_interrupted);
        clean.introduce(2, 2, "b");
        clean.leave(true, "its ranks failed");  // a goodbye, even a failed one
    }
    CHECK_THROWS(observer.wait({store::silent_departure_key}, std::chrono::milliseconds(50)));
    CHECK_FALSE(observer.check({store::silent_departure_key}));
    {
        auto killed = outsider(server.endpoint());
        send_bytes(killed.get(), store::encode(store::Message{store::Tag::introduce, 4, {"c", "2"}}));
        char reply[64];
        REQUIRE(::recv(killed.get(), reply, sizeof reply, 0) > 0);
    }  // no goodbye
    observer.wait({store::silent_departure_key}, std::chrono::seconds(5));  // throws if it never comes
    CHECK(store::as_string(observer.get(store::silent_departure_key)) == "c (127.0.0.1)");
}

namespace {

// Sends what it can of `bytes`; false when the server closed the connection meanwhile.
bool send_what_it_takes(int fd, const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
        const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) return false;
        sent += static_cast<std::size_t>(n);
    }
    return true;
}

// A soft limit on this process's file descriptors, for one scope.
class FileLimit {
public:
    explicit FileLimit(rlim_t soft) {
        REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved_) == 0);
        rlimit lowered = saved_;
        lowered.rlim_cur = soft;
        REQUIRE(::setrlimit(RLIMIT_NOFILE, &lowered) == 0);
    }
    ~FileLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }

private:
    rlimit saved_{};
};

int open_fds() {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        (void)entry;
        ++count;
    }
    return count;
}

}  // namespace

TEST_CASE("strangers' connections take at most a quarter of the caller's fds, and ranks still get in",
          "[store][failure]") {
    const FileLimit files(512);  // the store keeps 128 connections at most
    const store::Server server(loopback());
    const int before = open_fds();
    std::vector<mpify::detail::UniqueFd> strangers;
    for (int i = 0; i < 200; ++i) strangers.push_back(outsider(server.endpoint()));
    // A rank arrives after them: it takes the place of the oldest silent stranger.
    auto rank0 = mpify::detail::connect_store(settings_for(server.endpoint(), 0, 1, 5000));
    rank0->set("mpify/joined/0", {1});
    CHECK(rank0->get("mpify/joined/0") == std::vector<uint8_t>{1});
    // Ours: 200 strangers' ends and the rank's; the store's: 128 connections at most.
    CHECK(open_fds() - before <= 200 + 1 + 128 + 2);
    CHECK(closed_by_server(strangers.front().get()));  // the oldest went first
}

TEST_CASE("strangers cannot make the store hold more than its bounds of memory", "[store][failure]") {
    const store::Server server(loopback());
    // Unproven (no request yet): 64 KiB at most, then it is dropped.
    auto unproven = outsider(server.endpoint());
    const std::string announced = std::string("\xff\xff\xff\x00", 4);  // 16 MiB - 1 announced
    send_what_it_takes(unproven.get(), announced + std::string(100 * 1024, 'x'));
    char c;
    CHECK(::recv(unproven.get(), &c, 1, 0) <= 0);  // closed (a reset, when it had bytes unread)

    // Proven (one well-formed request first), each holding 12 MiB of an unfinished
    // message: 72 MiB together, past the 64 MiB the store holds; one is dropped.
    std::vector<mpify::detail::UniqueFd> holders;
    int dropped = 0;
    for (int i = 0; i < 6; ++i) {
        holders.push_back(outsider(server.endpoint()));
        send_bytes(holders.back().get(), store::encode(store::Message{store::Tag::count, 0, {}}));
        char reply[64];
        REQUIRE(::recv(holders.back().get(), reply, sizeof reply, 0) > 0);
        if (!send_what_it_takes(holders.back().get(), announced + std::string(12 << 20, 'y'))) ++dropped;
    }
    // One of them is closed by the server (its end reads as hung up).
    std::vector<pollfd> watched;
    for (auto& holder : holders) watched.push_back({holder.get(), POLLIN | POLLRDHUP, 0});
    if (dropped == 0) REQUIRE(::poll(watched.data(), watched.size(), 10000) > 0);
    // A rank's requests are still answered.
    auto rank0 = mpify::detail::connect_store(settings_for(server.endpoint(), 0, 1, 5000));
    rank0->set("k", {7});
    CHECK(rank0->get("k") == std::vector<uint8_t>{7});
}

TEST_CASE("a one-machine store lives in the abstract namespace and closes other users' connections at once",
          "[store][failure]") {
    Endpoint e;
    e.unix_path = private_socket_name();
    REQUIRE(e.unix_path.rfind("@mpify-group-", 0) == 0);
    CHECK(e.unix_path.size() == 13 + 32);  // 128 random bits
    const store::Server server(e);
    CHECK(Endpoint::parse(e.text(), "MPIFY_STORE").unix_path == e.unix_path);
    if (::geteuid() == 0) {
        // A process of user 65534 connects: closed before it can ask anything.
        const pid_t stranger = ::fork();
        REQUIRE(stranger >= 0);
        if (stranger == 0) {
            if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
            try {
                auto fd = connect_to(e, Clock::now() + std::chrono::seconds(5), never_interrupted);
                const std::string request = store::encode(store::Message{store::Tag::count, 0, {}});
                (void)!::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL);
                char c;
                ::_exit(::recv(fd.get(), &c, 1, 0) <= 0 ? 0 : 1);  // 0: closed without an answer
            } catch (...) {
                ::_exit(3);
            }
        }
        int status = 0;
        REQUIRE(::waitpid(stranger, &status, 0) == stranger);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    // This user's rank is served.
    auto rank0 = mpify::detail::connect_store(settings_for(e, 0, 1, 5000));
    rank0->set("k", {1});
    CHECK(rank0->get("k") == std::vector<uint8_t>{1});
}

TEST_CASE("a store with a secret serves only connections that prove it, and strangers leave it working",
          "[store][security]") {
    using mpify::detail::CallSecret;
    const CallSecret secret = CallSecret::fresh();
    const store::Server server(loopback(), secret);
    const Endpoint e = server.endpoint();

    // A stranger who sends a request without proof: refused (its request is taken as the
    // answer to the challenge, and wrong), the challenge the only bytes it ever gets.
    auto stranger = outsider(e);
    send_bytes(stranger.get(),
               store::encode(store::Message{store::Tag::set, 0, {"mpify/joined/1", "x"}}) + std::string(200, 'x'));
    std::string heard;
    char buffer[256];
    for (ssize_t got; (got = ::recv(stranger.get(), buffer, sizeof buffer, 0)) > 0;) heard.append(buffer, got);
    CHECK(heard.rfind("MPIFYCB1", 0) == 0);
    CHECK(heard.size() == 8 + 32);  // the challenge, nothing more: then closed

    // A client with another secret cannot connect, and says why without either secret.
    mpify::detail::DdpSettings wrong = settings_for(e, 1, 2, 2000);
    wrong.store_secret = CallSecret::fresh();
    try {
        mpify::detail::connect_store(wrong);
        FAIL("a client with the wrong secret was served");
    } catch (const std::exception& error) {
        CHECK_THAT(error.what(), Contains("do not share the group's secret"));
        CHECK_THAT(error.what(), !Contains(secret.hex()) && !Contains(wrong.store_secret->hex()));
    }
    // A client without one hears nothing it can parse: no reply within its timeout.
    auto without = mpify::detail::connect_store(settings_for(e, 1, 2, 500));
    CHECK_THROWS(without->get("mpify/joined/1"));

    // The group's ranks, with the secret, meet as if nothing happened; the stranger's set
    // never reached the store.
    mpify::detail::DdpSettings rank0 = settings_for(e, 0, 2, 5000), rank1 = settings_for(e, 1, 2, 5000);
    rank0.store_secret = secret;
    rank1.store_secret = secret;
    auto client0 = mpify::detail::connect_store(rank0);
    auto client1 = mpify::detail::connect_store(rank1);
    CHECK_FALSE(client0->check({"mpify/joined/1"}));
    client1->set("mpify/joined/1", {1});
    mpify::detail::wait_for_all(*client0, rank0, "joined", "did not join the group");
    CHECK(client0->get("mpify/joined/1") == std::vector<uint8_t>{1});
}
