// A warm template that stops answering (SIGSTOP, a debugger, a stuck library start-up)
// must not hold a call past its timeout: the wait for it is bounded, the template is
// killed, the error names it, and the next call starts a new one.
#include "functions.hpp"
#include "support.hpp"

#include <mpify/mpify.hpp>

#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

TEST_CASE("a stopped warm template fails the call at its timeout naming the template, and the next call works",
          "[robustness][template]") {
    mpify::Options options;
    options.spawner = mpify::Spawner::warm_template;
    REQUIRE(mpify::ranch(options, 2, in_program::add, 1, 2).size() == 2);
    const std::vector<pid_t> stopped = mpify_test::warm_templates_of(::getpid());
    REQUIRE_FALSE(stopped.empty());
    for (pid_t pid : stopped) REQUIRE(::kill(pid, SIGSTOP) == 0);

    options.timeout = std::chrono::seconds(3);
    std::string error;
    try {
        mpify::ranch(options, 2, in_program::add, 1, 2);
    } catch (const mpify::SpawnError& e) {
        error = e.what();
    }
    CHECK_THAT(error,
               Catch::Contains("warm template (pid " + std::to_string(stopped.front())) && Catch::Contains("timeout"));
    for (pid_t pid : stopped) CHECK(::kill(pid, 0) != 0);  // killed (and reaped), not left stopped

    options.timeout = std::chrono::seconds(0);
    CHECK(mpify::ranch(options, 2, in_program::add, 2, 3).size() == 2);
    CHECK(mpify_test::has_no_children());
}
