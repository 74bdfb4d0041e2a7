// mpify-worker against a caller that is not what it expects: one that goes away in the
// middle of sending the call (the worker must not wait for bytes that will never come,
// nor take memory for what the header announced: it exits at once, saying why), one of
// another mpify version (refused by name), and a library that does not load. And
// mpify-worker started as a launcher on another machine starts it: it connects back over
// TCP, proves its rank, starts the rank's worker and relays the call; with another call's
// secret it is not admitted and says so without the secret.
#include "common/secret_handshake.hpp"
#include "contract/process_contract.hpp"
#include "contract/remote_link.hpp"
#include "spawn/connect_back_listener.hpp"
#include "wire/frames.hpp"
#include "wire/messages.hpp"

#include <catch2/catch.hpp>
#include <mpify/version.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <utility>
#include <string>
#include <vector>

extern char** environ;

namespace {

// mpify-worker, started by hand as mpify starts it, with its channel and stderr kept here.
struct HandStartedWorker {
    pid_t pid = -1;
    int channel = -1;  ///< the caller's end
    int err = -1;      ///< the read end of its stderr
};

// With `connect_back` (MPIFY_CONNECT and the rest), started as a launcher on another
// machine would: no channel; it connects back itself.
HandStartedWorker start_worker_by_hand(const std::vector<std::string>& connect_back = {}) {
    int channel[2], err[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    std::vector<std::string> env_text = connect_back;
    if (connect_back.empty()) {
        posix_spawn_file_actions_adddup2(&actions, channel[1], mpify::detail::worker_channel_fd);
        env_text.push_back(std::string(mpify::detail::worker_env_var) + "=" +
                           std::to_string(mpify::detail::worker_channel_fd));
    }
    for (char** e = environ; *e; ++e) env_text.emplace_back(*e);
    std::vector<char*> env;
    for (std::string& entry : env_text) env.push_back(entry.data());
    env.push_back(nullptr);
    char worker_path[] = MPIFY_TEST_WORKER;
    char* argv[] = {worker_path, nullptr};
    pid_t worker = -1;
    REQUIRE(::posix_spawn(&worker, worker_path, &actions, nullptr, argv, env.data()) == 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(channel[1]);
    ::close(err[1]);
    if (!connect_back.empty()) ::close(std::exchange(channel[0], -1));
    return {worker, channel[0], err[0]};
}

// Waits for the worker's end; returns its stderr and sets `status`.
std::string reap(const HandStartedWorker& worker, int& status) {
    REQUIRE(::waitpid(worker.pid, &status, 0) == worker.pid);
    std::string said;
    char buffer[4096];
    for (ssize_t n; (n = ::read(worker.err, buffer, sizeof buffer)) > 0;)
        said.append(buffer, static_cast<std::size_t>(n));
    ::close(worker.err);
    return said;
}

void send_all(int fd, const std::string& bytes) {
    for (std::size_t sent = 0; sent < bytes.size();) {
        const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        REQUIRE(n > 0);
        sent += static_cast<std::size_t>(n);
    }
}

}  // namespace

TEST_CASE("a worker whose caller closes the channel in the middle of a 4 GiB call exits at once, saying why",
          "[wire][worker]") {
    const HandStartedWorker worker = start_worker_by_hand();
    // A call announcing 4 GiB, 1 MiB of it, then the caller's end closes.
    send_all(worker.channel, mpify::detail::frame_header(mpify::detail::FrameType::call, std::uint64_t{4} << 30) +
                                 std::string(1 << 20, 'a'));
    ::close(worker.channel);
    int status = 0;
    const std::string said = reap(worker, status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 70);
    CHECK_THAT(said, Catch::Contains("ended in the middle"));
}

namespace {

// A call of "anything" as rank 1 of 2, from a caller of mpify `version`, with the function
// in `library`.
mpify::detail::CallMeta call_of_anything(const std::string& version, const std::string& library = "") {
    mpify::detail::CallMeta meta;
    meta.mpify_version = version;
    meta.world_size = 2;
    meta.rank = 1;
    meta.function = "anything";
    meta.library = library;
    return meta;
}

// Sends `meta` to a worker started by hand and returns the failure it reports; its exit
// status goes to `status`.
std::string failure_reported_for(const mpify::detail::CallMeta& meta, int& status) {
    const HandStartedWorker worker = start_worker_by_hand();
    send_all(worker.channel, mpify::detail::call_frame_head(meta, 0));
    const std::optional<mpify::detail::Frame> reply = mpify::detail::read_frame(worker.channel);
    ::close(worker.channel);
    reap(worker, status);
    REQUIRE(reply);
    REQUIRE(reply->type == mpify::detail::FrameType::failure);
    return mpify::detail::decode_failure(reply->payload).what;
}

}  // namespace

TEST_CASE("a worker refuses a call from another version of mpify, naming both", "[wire][worker]") {
    int status = 0;
    const std::string what = failure_reported_for(call_of_anything("0.0.1-elsewhere"), status);
    CHECK_THAT(what, Catch::Contains("the caller runs mpify 0.0.1-elsewhere"));
    CHECK_THAT(what, Catch::Contains("this worker mpify " MPIFY_VERSION_STRING));
    CHECK_THAT(what, Catch::Contains("libmpify.so"));
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
}

TEST_CASE("a worker that cannot load the function's library says so, with its own mpify version", "[wire][worker]") {
    int status = 0;
    const std::string what =
        failure_reported_for(call_of_anything(MPIFY_VERSION_STRING, "/nonexistent/libmpify_test_missing.so"), status);
    CHECK_THAT(what, Catch::Contains("cannot load /nonexistent/libmpify_test_missing.so, which holds the function"));
    CHECK_THAT(what, Catch::Contains("this worker runs mpify " MPIFY_VERSION_STRING));
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
}

namespace {

// The environment a launcher gives a remote worker of rank `rank`.
std::vector<std::string> way_back(const mpify::detail::ConnectBackListener& listener, const std::string& secret_hex,
                                  int rank) {
    return {std::string(mpify::detail::connect_env_var) + "=tcp:" + listener.address() + ":" +
                std::to_string(listener.port()),
            std::string(mpify::detail::connect_secret_env_var) + "=" + secret_hex,
            std::string(mpify::detail::connect_rank_env_var) + "=" + std::to_string(rank)};
}

}  // namespace

TEST_CASE("an agent started with the way back proves its rank, starts the worker there and relays the call",
          "[wire][worker][connect_back]") {
    namespace d = mpify::detail;
    d::ConnectBackListener listener("127.0.0.1", 0);
    const auto secret = d::CallSecret::fresh();
    HandStartedWorker agent = start_worker_by_hand(way_back(listener, secret.hex(), 1));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    auto admitted = listener.admit(secret, 2, {false, true}, deadline);
    REQUIRE(admitted.count(1) == 1);
    const int link = admitted[1].get();
    const d::LinkMessage hello = d::receive_link_message(link, deadline, "hello");
    REQUIRE(hello.type == d::LinkType::hello);
    CHECK(d::decode_hello(hello.payload).mpify_version == MPIFY_VERSION_STRING);
    d::send_link_message(link, d::LinkType::start, d::encode_start({{"MPIFY_TEST_MARK", "1"}}));
    REQUIRE(d::receive_link_message(link, deadline, "started").type == d::LinkType::started);
    // A call of another version: the worker there refuses it by name, and ends.
    d::send_link_message(link, d::LinkType::channel, d::call_frame_head(call_of_anything("0.0.1-elsewhere"), 0));
    d::FrameParser frames;
    std::optional<d::WorkerEnd> end;
    while (!end) {
        const d::LinkMessage message = d::receive_link_message(link, deadline, "the worker's answer");
        if (message.type == d::LinkType::channel) frames.append(message.payload.data(), message.payload.size());
        if (message.type == d::LinkType::exited) end = d::decode_end(message.payload);
    }
    d::Frame reply;
    REQUIRE(frames.next(reply));
    REQUIRE(reply.type == d::FrameType::failure);
    CHECK_THAT(d::decode_failure(reply.payload).what, Catch::Contains("the caller runs mpify 0.0.1-elsewhere"));
    CHECK(end->exited);
    admitted.clear();
    int status = 0;
    reap(agent, status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(listener.refusals().empty());
}

TEST_CASE("a worker with another call's secret is not admitted, and says so without the secret",
          "[wire][worker][connect_back]") {
    mpify::detail::ConnectBackListener listener("127.0.0.1", 0);
    const auto secret = mpify::detail::CallSecret::fresh(), others = mpify::detail::CallSecret::fresh();
    const HandStartedWorker worker = start_worker_by_hand(way_back(listener, others.hex(), 1));
    const auto admitted =
        listener.admit(secret, 2, {false, true}, std::chrono::steady_clock::now() + std::chrono::seconds(3));
    CHECK(admitted.empty());
    int status = 0;
    const std::string said = reap(worker, status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 70);
    CHECK_THAT(said, Catch::Contains("cannot join its caller at tcp:127.0.0.1:" + std::to_string(listener.port())));
    CHECK_THAT(said, !Catch::Contains(others.hex()) && !Catch::Contains(secret.hex()));
    REQUIRE(listener.refusals().size() == 1);
    CHECK_THAT(listener.refusals()[0], Catch::Contains("does not prove the call's secret"));
}
