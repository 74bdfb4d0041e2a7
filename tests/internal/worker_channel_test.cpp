// A worker whose caller goes away in the middle of sending the call: the worker must not
// wait for bytes that will never come, nor take memory for what the header announced;
// it exits at once, saying why.
#include "wire/frames.hpp"
#include "worker/process_contract.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

extern char** environ;

TEST_CASE("a worker whose caller closes the channel in the middle of a 4 GiB call exits at once, saying why",
          "[wire][worker]") {
    int channel[2], err[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    posix_spawn_file_actions_adddup2(&actions, channel[1], mpify::detail::worker_channel_fd);
    std::vector<std::string> env_text{std::string(mpify::detail::worker_env_var) + "=" +
                                      std::to_string(mpify::detail::worker_channel_fd)};
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

    // A call announcing 4 GiB, 1 MiB of it, then the caller's end closes.
    const std::string start =
        mpify::detail::frame_header(mpify::detail::FrameType::call, std::uint64_t{4} << 30) + std::string(1 << 20, 'a');
    for (std::size_t sent = 0; sent < start.size();) {
        const ssize_t n = ::send(channel[0], start.data() + sent, start.size() - sent, MSG_NOSIGNAL);
        REQUIRE(n > 0);
        sent += static_cast<std::size_t>(n);
    }
    ::close(channel[0]);

    int status = 0;
    REQUIRE(::waitpid(worker, &status, 0) == worker);
    std::string said;
    char buffer[4096];
    for (ssize_t n; (n = ::read(err[0], buffer, sizeof buffer)) > 0;) said.append(buffer, static_cast<std::size_t>(n));
    ::close(err[0]);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 70);
    CHECK_THAT(said, Catch::Contains("ended in the middle"));
}
