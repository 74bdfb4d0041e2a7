// Compiled with MPIFY_TEST_NS=in_program into the test program and with
// MPIFY_TEST_NS=in_library into libmpify_test_functions.so (see functions.hpp).
#include "functions.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <utility>

namespace {
std::string env_or_unset(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "<unset>";
}

mpify_test::Report make_report(std::vector<std::string> args) {
    mpify_test::Report r;
    r.local_rank = mpify::local_rank();
    r.local_world_size = mpify::local_world_size();
    r.env_local_rank = env_or_unset("LOCAL_RANK");
    r.env_local_world_size = env_or_unset("LOCAL_WORLD_SIZE");
    r.pid = static_cast<int>(::getpid());
    r.args = std::move(args);
    std::ifstream comm("/proc/self/comm");
    std::getline(comm, r.process_name);
    return r;
}
}  // namespace

namespace MPIFY_TEST_NS {

mpify_test::Report report() { return make_report({}); }
MPIFY_REGISTER(report);

mpify_test::Report report_args(std::string a, int b, const std::string& c) {
    return make_report({a, std::to_string(b), c});
}
MPIFY_REGISTER(report_args);

std::pair<int, std::string> parent() {
    std::string name;
    std::getline(std::ifstream("/proc/" + std::to_string(::getppid()) + "/comm"), name);
    return {static_cast<int>(::getppid()), name};
}
MPIFY_REGISTER(parent);

int add(int a, int b) { return a + b + mpify::local_rank(); }
MPIFY_REGISTER(add);

void noop() {}
MPIFY_REGISTER(noop);

void touch(std::string dir) { std::ofstream(dir + "/rank" + std::to_string(mpify::local_rank())) << "done"; }
MPIFY_REGISTER(touch);

std::string echo_string(std::string s) { return s; }
MPIFY_REGISTER(echo_string);

std::vector<double> echo_doubles(std::vector<double> v) { return v; }
MPIFY_REGISTER(echo_doubles);

mpify_test::Nested echo_nested(mpify_test::Nested v) { return v; }
MPIFY_REGISTER(echo_nested);

mpify_test::Mixed echo_mixed(mpify_test::Mixed v) { return v; }
MPIFY_REGISTER(echo_mixed);

std::size_t byte_count(const std::string& blob) { return blob.size(); }
MPIFY_REGISTER(byte_count);

int throw_on(int rank) {
    if (mpify::local_rank() == rank) throw std::invalid_argument("bad value on rank " + std::to_string(rank));
    return rank;
}
MPIFY_REGISTER(throw_on);

int say_and_throw_on(int rank, std::string text) {
    if (mpify::local_rank() != rank) return rank;
    std::cerr << text << std::endl;
    throw std::runtime_error(text);
}
MPIFY_REGISTER(say_and_throw_on);

int throw_int_on(int rank) {
    if (mpify::local_rank() == rank) throw 42;
    return rank;
}
MPIFY_REGISTER(throw_int_on);

int crash_on(int rank, std::string how) {
    if (mpify::local_rank() != rank) return 0;
    std::cerr << "rank " << rank << " is about to " << how << std::endl;
    // The default action whatever handler a sanitizer installed when the process (or
    // the warm template it was forked from) started: the tests are about a death by signal.
    if (how == "segv") {
        ::signal(SIGSEGV, SIG_DFL);
        ::raise(SIGSEGV);
    }
    if (how == "abort") {
        ::signal(SIGABRT, SIG_DFL);
        std::abort();
    }
    if (how == "exit3") std::exit(3);
    if (how == "exit0") std::exit(0);
    return 1;
}
MPIFY_REGISTER(crash_on);

int fail_before_restart(int failing_rank, int failed_attempts, std::string how) {
    // Fails on the first `failed_attempts` attempts, on one rank, in one way; then every
    // rank says which attempt it ran.
    const int attempt = mpify::restart_count();
    if (attempt < failed_attempts && mpify::local_rank() == failing_rank) {
        if (how == "kill") ::raise(SIGKILL);
        if (how == "exit3") std::exit(3);
        throw std::runtime_error("failing on attempt " + std::to_string(attempt));
    }
    return attempt * 10 + mpify::local_rank();
}
MPIFY_REGISTER(fail_before_restart);

int fail_then_wait_for_interrupt(int max_seconds) {
    // Rank 1 fails the first attempt; on the restart every rank says so and waits.
    if (mpify::restart_count() == 0) {
        if (mpify::local_rank() == 1) throw std::runtime_error("first attempt fails");
        if (mpify::is_worker())
            for (;;) ::pause();
        return 0;
    }
    std::cout << "waiting on attempt " << mpify::restart_count() << std::endl;
    return wait_for_interrupt(max_seconds);
}
MPIFY_REGISTER(fail_then_wait_for_interrupt);

int hang_on_workers(int printed_marker) {
    // The marker line lets a test wait for the worker to be running, then act.
    std::cout << "pid " << ::getpid() << " marker " << printed_marker << std::endl;
    if (mpify::is_worker())
        for (;;) ::pause();
    return printed_marker;
}
MPIFY_REGISTER(hang_on_workers);

// Where a rank waits, for the tests of its stack: in a loop of its own, or in read(2).
// Not inlined: the frames are what the tests look for.
namespace {
// An fd spin_in_own_loop closes as it starts: whoever reads its other end to the end
// knows the rank is in the loop's frame.
int closed_in_the_loop = -1;
}  // namespace

__attribute__((noinline)) void spin_in_own_loop() {
    if (closed_in_the_loop >= 0) ::close(std::exchange(closed_in_the_loop, -1));
    volatile unsigned long turns = 0;
    for (;;) turns = turns + 1;
}

__attribute__((noinline)) void block_in_read() {
    int fds[2];
    if (::pipe(fds) != 0) return;
    char byte = 0;
    (void)!::read(fds[0], &byte, 1);  // nobody writes: blocks until the rank is stopped
}

int wait_in_own_code(std::string how, std::string fifo) {
    // Rank 0 returns; the others wait one way or another. "fail": rank 1 throws once
    // rank 2 is in its loop (it closes its end of the FIFO there: rank 1 reads to the end).
    const int rank = mpify::local_rank();
    if (rank == 0) return 0;
    if (how == "fail") {
        if (rank == 1) {
            const int fd = ::open(fifo.c_str(), O_RDONLY);  // until rank 2 opens its end
            char byte;
            for (ssize_t got = 1; fd >= 0 && (got > 0 || (got < 0 && errno == EINTR));) got = ::read(fd, &byte, 1);
            if (fd >= 0) ::close(fd);
            throw std::runtime_error("rank 1 fails first");
        }
        closed_in_the_loop = ::open(fifo.c_str(), O_WRONLY);
    }
    if (how == "read") block_in_read();
    spin_in_own_loop();
    return rank;
}
MPIFY_REGISTER(wait_in_own_code);

__attribute__((noinline)) int loop_until_interrupted() {
    // The caller's rank checks; a worker spins until it is stopped.
    if (mpify::is_worker()) spin_in_own_loop();
    while (!mpify::interrupt_requested()) {
    }
    return 0;
}
MPIFY_REGISTER(loop_until_interrupted);

bool blocks_signal(int signal) {
    sigset_t mask;
    ::pthread_sigmask(SIG_SETMASK, nullptr, &mask);
    return sigismember(&mask, signal) == 1;
}
MPIFY_REGISTER(blocks_signal);

int start_a_sleep_then(int how) {
    // A process of the rank's own, as a shell command or a data loader starts one.
    const pid_t child = ::fork();
    if (child == 0) {
        ::execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    std::cout << "child " << child << std::endl;
    if (how == 1) throw std::runtime_error("failing with a child running");
    if (how == 0)
        for (;;) ::pause();
    return how;
}
MPIFY_REGISTER(start_a_sleep_then);

int wait_for_interrupt(int max_seconds) {
    // Every rank says it runs, then waits; the caller's rank until interrupt_requested().
    std::cout << "waiting" << std::endl;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(max_seconds);
    while (!mpify::interrupt_requested()) {
        if (std::chrono::steady_clock::now() > until) throw std::runtime_error("no interrupt came");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return 1;
}
MPIFY_REGISTER(wait_for_interrupt);

int fail_or_hang(int failing_rank) {
    // The failing rank throws; every other worker would wait forever; a caller returns.
    if (mpify::local_rank() == failing_rank) throw std::invalid_argument("failing on purpose");
    if (mpify::is_worker())
        for (;;) ::pause();
    return 0;
}
MPIFY_REGISTER(fail_or_hang);

int root_cause_then_peer(std::string fifo) {
    // Like a collective broken by a dead peer: rank 0 reads from rank 1, which fails
    // first; rank 0 then fails because its peer went away.
    if (mpify::local_rank() == 1) {
        const int fd = ::open(fifo.c_str(), O_WRONLY);  // pairs with rank 0's open
        (void)fd;                                       // closed when this process exits
        throw std::runtime_error("the root cause");
    }
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    char byte;
    const ssize_t n = ::read(fd, &byte, 1);  // end of file once rank 1 has exited
    ::close(fd);
    if (n <= 0) throw std::runtime_error("peer went away");
    return 0;
}
MPIFY_REGISTER(root_cause_then_peer);

void print_lines(int count) {
    for (int i = 0; i < count; ++i) std::cout << "line " << i << " of rank " << mpify::local_rank() << '\n';
    std::cerr << "an error line" << '\n';
    std::cout << "no newline at the end";
}
MPIFY_REGISTER(print_lines);

bool context_active() { return mpify_test::TestContext::active; }
MPIFY_REGISTER(context_active);

std::string env_of(std::string name) { return env_or_unset(name.c_str()); }
MPIFY_REGISTER(env_of);

int nested_ranch() { return mpify::ranch(1, add, 1, 1).front(); }
MPIFY_REGISTER(nested_ranch);

}  // namespace MPIFY_TEST_NS
