// A stranger on the same machine against Gloo's connections. Gloo (Debian's 2022 version)
// listens on loopback once per pair of ranks and takes the first connection that comes.
// A process of another user watches /proc/net/tcp and connects to every listening port
// it sees, sending one byte: the group must either form with its own ranks only (the
// all-reduce is right) or fail with an mpify::Error that names the intrusion, never
// with a foreign exception and never by waiting for its timeout.
//
// The attack runs in a fresh process of this test program, in a network namespace of
// its own (it needs root; else the test says so and passes nothing): every port
// listening there is the attack's, so the stranger disturbs no other test running
// beside it, and no warm template started earlier by this process is left outside.
#include "ddp_functions.hpp"

#include <mpify/ddp_guard.hpp>
#include <mpify/error.hpp>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <spawn.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using Catch::Contains;

extern char** environ;

namespace {

// This thread (and every process started from it later) in a new network namespace
// whose loopback is up. False when this process may not (not root).
bool in_private_network() {
    if (::unshare(CLONE_NEWNET) != 0) return false;
    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return false;
    ifreq request{};
    std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
    bool up = ::ioctl(s, SIOCGIFFLAGS, &request) == 0;
    request.ifr_flags = static_cast<short>(request.ifr_flags | IFF_UP | IFF_RUNNING);
    up = up && ::ioctl(s, SIOCSIFFLAGS, &request) == 0;
    ::close(s);
    return up;
}

// The TCP ports listening in this network namespace, as /proc/net/tcp lists them.
std::set<int> listening_ports() {
    std::ifstream table("/proc/net/tcp");
    std::set<int> ports;
    std::string line;
    std::getline(table, line);  // the header
    while (std::getline(table, line)) {
        std::istringstream fields(line);
        std::string slot, local, remote, state;
        fields >> slot >> local >> remote >> state;
        if (state == "0A") ports.insert(std::stoi(local.substr(local.find(':') + 1), nullptr, 16));
    }
    return ports;
}

// The stranger's life: connect to each new listening port (up to `most` of them), send a
// byte, keep the connection; when the test closes `stop`, report how many ports were
// taken on `report`.
[[noreturn]] void be_the_stranger(int stop, int report, int most) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(2);
    std::set<int> seen;
    std::vector<int> held;
    for (;;) {
        pollfd watch{stop, POLLIN, 0};
        if (::poll(&watch, 1, 0) > 0) break;  // the test closed its end: done
        for (int port : listening_ports()) {
            if (static_cast<int>(held.size()) >= most || !seen.insert(port).second) continue;
            const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in to{};
            to.sin_family = AF_INET;
            to.sin_port = htons(static_cast<uint16_t>(port));
            to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
                (void)!::send(fd, "x", 1, MSG_NOSIGNAL);
                held.push_back(fd);
            } else if (fd >= 0) {
                ::close(fd);
            }
        }
        const timespec pace{0, 200'000};  // 0.2 ms between looks: pacing, not waiting for anything
        ::nanosleep(&pace, nullptr);
    }
    const int taken = static_cast<int>(held.size());
    (void)!::write(report, &taken, sizeof taken);
    ::_exit(0);
}

class Stranger {
public:
    /// A stranger that takes up to `most` ports.
    explicit Stranger(int most) {
        int stop[2], report[2];
        REQUIRE(::pipe2(stop, O_CLOEXEC) == 0);
        REQUIRE(::pipe2(report, O_CLOEXEC) == 0);
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            ::close(stop[1]);
            ::close(report[0]);
            be_the_stranger(stop[0], report[1], most);
        }
        ::close(stop[0]);
        ::close(report[1]);
        stop_ = stop[1];
        report_ = report[0];
    }
    /// Ends the stranger; the number of connections it made.
    int finish() {
        ::close(stop_);
        int taken = -1;
        (void)!::read(report_, &taken, sizeof taken);
        ::close(report_);
        int status = 0;
        ::waitpid(pid_, &status, 0);
        return taken;
    }

private:
    pid_t pid_ = -1;
    int stop_ = -1;
    int report_ = -1;
};

// One in_ddp(3) whose ranks all-reduce their numbers: true when it formed and gave
// 0 + 1 + 2, false when it failed with an mpify::Error naming the intrusion; anything
// else (another exception, a wrong sum, a message without the cause) fails the test.
bool group_formed(int call) {
    INFO("call " << call);
    mpify::DdpOptions options;
    options.backend = mpify::Backend::gloo;  // on one machine the default is shared memory: no ports
    options.timeout = std::chrono::seconds(20);
    int sum = -1;
    try {
        sum = mpify::in_ddp(options, 3, ddp_test::allreduce_rank);
    } catch (const mpify::Error& e) {
        CHECK_THAT(e.what(), Contains("another process"));
        return false;
    }
    CHECK(sum == 3);
    return true;
}

}  // namespace

TEST_CASE("a stranger connecting to Gloo's ports neither joins a group nor fails it with a foreign error",
          "[ddp][security][once]") {
    if (::geteuid() != 0) {
        WARN("skipped: a network namespace of its own needs root");
        return;
    }
    // The hidden case below, alone in a new process of this program (its output goes
    // where this test's goes; its exit status is its number of failed checks).
    char self[] = "/proc/self/exe";
    char attack[] = "Gloo's ports under attack, in a network namespace of its own";
    char* argv[] = {self, attack, nullptr};
    pid_t child = -1;
    REQUIRE(::posix_spawn(&child, self, nullptr, nullptr, argv, environ) == 0);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("Gloo's ports under attack, in a network namespace of its own", "[.]") {
    // Once per process (Catch runs this case again for each section).
    static const bool isolated = in_private_network();
    REQUIRE(isolated);
    SECTION("a stranger that connects to every port: each group forms with its own ranks or names the intrusion") {
        Stranger stranger(1 << 20);
        int formed = 0;
        for (int call = 0; call < 6; ++call) formed += group_formed(call) ? 1 : 0;
        const int taken = stranger.finish();
        INFO(formed << " of 6 groups formed; the stranger connected to " << taken << " ports");
        CHECK(taken > 0);  // it did reach Gloo's ports
    }
    SECTION("a stranger that takes one port: the group forms again on new ports") {
        Stranger stranger(1);
        const bool formed = group_formed(0);
        CHECK(stranger.finish() == 1);
        CHECK(formed);
    }
}
