// Bad input: a clear error before anything is spawned.
#include "functions.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>

using Catch::Contains;

namespace {
int not_registered(int x) { return x; }

struct UnregisteredContext {};
}  // namespace

TEST_CASE("n below 1 is a usage error", "[usage]") {
    REQUIRE_THROWS_MATCHES(mpify::ranch(0, in_program::add, 1, 2), mpify::UsageError,
                           Catch::Message("mpify::ranch(add, n=0): n must be at least 1 (it is 0)"));
    REQUIRE_THROWS_AS(mpify::ranch(-3, in_program::add, 1, 2), mpify::UsageError);
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a caller rank outside 0..n-1 is a usage error", "[usage]") {
    mpify::Options options;
    options.caller_rank = 3;
    REQUIRE_THROWS_WITH(mpify::ranch(options, 3, in_program::add, 1, 2), Contains("caller_rank is 3, outside [0, 3)"));
    options.caller_rank = -1;
    REQUIRE_THROWS_AS(mpify::ranch(options, 3, in_program::add, 1, 2), mpify::UsageError);
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("output_ranks naming a rank outside the call is a usage error", "[usage]") {
    mpify::Options options;
    options.output_ranks = {0, 3};
    REQUIRE_THROWS_WITH(mpify::ranch(options, 3, in_program::add, 1, 2),
                        Contains("Options::output_ranks names rank 3, outside [0, 3)"));
}

TEST_CASE("a function that is not registered is a usage error that says what to add", "[usage]") {
    REQUIRE_THROWS_MATCHES(mpify::ranch(2, not_registered, 1), mpify::UsageError,
                           Catch::Predicate<std::exception>([](const std::exception& e) {
                               const std::string m = e.what();
                               return m.find("is not registered") != std::string::npos &&
                                      m.find("MPIFY_REGISTER(") != std::string::npos;
                           }));
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a context type that is not registered is a usage error", "[usage]") {
    REQUIRE_THROWS_WITH(mpify::ranch<UnregisteredContext>(2, in_program::add, 1, 2),
                        Contains("MPIFY_REGISTER_CONTEXT"));
}

TEST_CASE("a bad environment variable name is a usage error", "[usage]") {
    mpify::Options options;
    options.env["A=B"] = "x";
    REQUIRE_THROWS_WITH(mpify::ranch(options, 2, in_program::add, 1, 2),
                        Contains("'A=B' is not a valid environment variable name"));
}

TEST_CASE("a NUL byte in an environment variable's name or value is a usage error", "[usage][robustness]") {
    mpify::Options name_with_nul;
    name_with_nul.env[std::string("AB\0C", 4)] = "x";
    CHECK_THROWS_WITH(mpify::ranch(name_with_nul, 2, in_program::add, 1, 2),
                      Contains("'AB' is not a valid environment variable name"));
    mpify::Options value_with_nul;
    value_with_nul.env["MPIFY_TEST_NUL"] = std::string("ab\0cd", 5);
    CHECK_THROWS_WITH(mpify::ranch(value_with_nul, 2, in_program::add, 1, 2),
                      Contains("the value of MPIFY_TEST_NUL contains a NUL byte at 2"));
    CHECK(mpify_test::has_no_children());  // refused before anything was spawned
}

TEST_CASE("ranch inside a ranch on the same process is a usage error", "[usage]") {
    REQUIRE_THROWS_WITH(mpify::ranch(1, in_program::nested_ranch), Contains("cannot be nested"));
}

TEST_CASE("a program that never called mpify::init gets a clear error and spawns nothing", "[usage]") {
    mpify_test::Subprocess program(MPIFY_TEST_NO_INIT_PROGRAM, {});
    const std::string out = program.read_all();
    const int status = program.wait();
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK_THAT(out, Contains("UsageError: mpify: function 'twice' is defined in this program, but the "
                             "program never called mpify::init(argc, argv)"));
    CHECK_THAT(out, Contains("children: none"));
}

TEST_CASE("ignoring SIGCHLD is reported instead of losing the workers' exit status", "[usage]") {
    auto previous = ::signal(SIGCHLD, SIG_IGN);
    CHECK_THROWS_WITH(mpify::ranch(2, in_program::add, 1, 2), Contains("SIGCHLD is ignored"));
    ::signal(SIGCHLD, previous);
}
