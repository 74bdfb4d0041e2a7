// Nothing lingers: no file descriptors, no zombies, no orphans, no growing memory.
#include "functions.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <signal.h>

#include <sstream>

TEST_CASE("30 ranch calls in a row leave fds children and memory as they were", "[resources]") {
    mpify::ranch(2, in_program::noop);  // first call: lazy initializations happen here
    mpify::ranch(2, in_library::noop);
    const int fds_before = mpify_test::open_fd_count();
    const long rss_before = mpify_test::rss_kib();
    for (int i = 0; i < 30; ++i) {
        if (i % 2 == 0) mpify::ranch(2, in_program::noop);
        else mpify::ranch(2, in_library::noop);
    }
    CHECK(mpify_test::open_fd_count() == fds_before);
    CHECK(mpify_test::has_no_children());
#ifndef MPIFY_TEST_SANITIZED
    // Bounded memory: a leak of even one argument buffer per call would show here.
    // (Under ASan, RSS also holds its quarantine of freed memory; LeakSanitizer checks
    // for leaks there instead, at the exit of every test process.)
    CHECK(mpify_test::rss_kib() - rss_before < 16 * 1024);
#else
    (void)rss_before;
#endif
}

TEST_CASE("failed calls leak no fds or children either", "[resources][failure]") {
    mpify::Options options;
    options.on_output = [](int, mpify::Stream, const std::string&) {};
    mpify_test::let_crashes_through(options);
    CHECK_THROWS(mpify::ranch(options, 2, in_library::crash_on, 1, std::string("segv")));
    const int fds_before = mpify_test::open_fd_count();
    for (int i = 0; i < 5; ++i) {
        CHECK_THROWS(mpify::ranch(options, 2, in_library::crash_on, 1, std::string("segv")));
        CHECK_THROWS(mpify::ranch(options, 2, in_library::throw_on, 1));
    }
    CHECK(mpify_test::open_fd_count() == fds_before);
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("workers and the warm template die within a second when their caller is killed with SIGKILL", "[resources]") {
    mpify_test::Subprocess caller(MPIFY_TEST_ORPHAN_CALLER, {});
    std::vector<pid_t> workers;
    for (int i = 0; i < 3; ++i) {
        const std::string line = caller.read_line();  // "[rank k] pid N marker 7"
        INFO("line from the caller: " << line);
        REQUIRE(line.find("marker 7") != std::string::npos);
        std::istringstream in(line.substr(line.find("pid ") + 4));
        pid_t pid = 0;
        in >> pid;
        REQUIRE(pid > 0);
        workers.push_back(pid);
    }
    const std::vector<pid_t> templates = mpify_test::warm_templates_of(caller.pid());
    CHECK(templates.size() == (mpify_test::spawner_under_test() == mpify::Spawner::warm_template ? 1U : 0U));
    caller.kill(SIGKILL);
    caller.wait();
    for (pid_t pid : workers) {
        INFO("worker pid " << pid);
        CHECK(mpify_test::wait_for_exit(pid, 1000));
    }
    for (pid_t pid : templates) {
        INFO("template pid " << pid);
        CHECK(mpify_test::wait_for_exit(pid, 1000));
    }
}
