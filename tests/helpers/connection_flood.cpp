// A stranger flooding a caller's connect-back port with new connections, as fast as one
// process can open them, for the flood tests (tests/helpers/agent_impostor.py flood):
//   mpify_test_connection_flood ADDRESS PORT SECONDS REPORT_FILE
// Each connection is opened without blocking and left open and silent; at most `kept`
// are open at once (the oldest is closed to open the next). Prints "flooding" on stdout
// once the first `kept` are open, and writes "CONNECTIONS SECONDS" to REPORT_FILE every
// 1024 connections and when it ends: after SECONDS, when the port refuses connections
// (the caller closed it: every agent is in), or at SIGTERM.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <iostream>

namespace {

volatile std::sig_atomic_t stopped = 0;

void on_sigterm(int) { stopped = 1; }

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::cerr << "usage: mpify_test_connection_flood ADDRESS PORT SECONDS REPORT_FILE\n";
        return 2;
    }
    ::signal(SIGPIPE, SIG_IGN);  // its reader may be gone once it has read "flooding"
    ::signal(SIGTERM, on_sigterm);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(std::atoi(argv[2])));
    if (::inet_pton(AF_INET, argv[1], &to.sin_addr) != 1) {
        std::cerr << "not an IPv4 address: " << argv[1] << "\n";
        return 2;
    }
    constexpr std::size_t kept = 512;  // well within the default limit of 1024 fds
    const auto start = std::chrono::steady_clock::now();
    const auto end = start + std::chrono::seconds(std::atoi(argv[3]));
    std::deque<int> open;
    long opened = 0;
    bool said = false;
    auto report = [&] {
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::ofstream(argv[4]) << opened << " " << seconds << "\n";
    };
    while (!stopped && std::chrono::steady_clock::now() < end) {
        if (opened % 1024 == 1023) {
            report();
            // The newest of the oldest connections, refused: nothing listens any more.
            int error = 0;
            socklen_t size = sizeof error;
            if (!open.empty() && ::getsockopt(open.front(), SOL_SOCKET, SO_ERROR, &error, &size) == 0 &&
                error == ECONNREFUSED)
                break;
        }
        if (open.size() == kept) {
            ::close(open.front());
            open.pop_front();
            if (!said) {
                std::cout << "flooding" << std::endl;
                said = true;
            }
        }
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        (void)::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to);
        open.push_back(fd);
        ++opened;
    }
    report();
    return 0;
}
