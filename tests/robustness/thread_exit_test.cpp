// A thread that made an earlier ranch call (and so started the warm template) may end
// while a later call runs in another thread: the later call's workers must live on.
#include "functions.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <string>
#include <thread>

namespace {

// The thread that makes the first call, and what tells it to end.
std::thread first_caller;
std::promise<void> end_first_caller;
// Where rank 1 connects to the caller's rank 0 (a socket the test listens on).
int listener = -1;

// Rank 1 connects and waits for a byte; rank 0 (the caller) accepts, ends the first
// caller's thread, and only then sends the byte. Each rank returns its rank.
int outlive_the_first_caller(std::string socket_path) {
    if (mpify::local_rank() == 1) {
        const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
            throw std::runtime_error("rank 1 cannot connect to rank 0");
        char byte = 0;
        if (::read(fd, &byte, 1) != 1) throw std::runtime_error("rank 0 sent nothing");
        return 1;
    }
    pollfd incoming{listener, POLLIN, 0};
    if (::poll(&incoming, 1, 60'000) != 1) throw std::runtime_error("rank 1 never connected");
    const int connection = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    end_first_caller.set_value();
    first_caller.join();  // rank 1 is running now: the thread that started the template ends
    (void)!::send(connection, "x", 1, MSG_NOSIGNAL);
    ::close(connection);
    return 0;
}
MPIFY_REGISTER(outlive_the_first_caller);

}  // namespace

TEST_CASE("a call's workers outlive the end of the thread that made the first call", "[robustness][template]") {
    mpify_test::TempDir dir;
    const std::string socket_path = dir.path() + "/rank0";
    listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(listener, 1) == 0);

    // The first call, from a thread of its own, starts the program's warm template.
    std::promise<void> first_call_done;
    first_caller = std::thread([&first_call_done] {
        mpify::ranch(2, in_program::noop);
        first_call_done.set_value();
        end_first_caller.get_future().wait();
    });
    first_call_done.get_future().wait();

    CHECK(mpify::ranch(2, outlive_the_first_caller, socket_path) == std::vector<int>{0, 1});
    CHECK(mpify_test::has_no_children());
    ::close(listener);
}
