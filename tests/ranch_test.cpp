// What ranch does when all goes well: ranks, pids, arguments, results, environment,
// output relay and contexts, with both worker hosts.
#include "functions.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

using mpify_test::Report;

namespace {

struct Host {
    const char* name;
    Report (*report)();
    Report (*report_args)(std::string, int, const std::string&);
};
const Host hosts[] = {
    {"program host", in_program::report, in_program::report_args},
    {"library host", in_library::report, in_library::report_args},
};

// Python mpify's own test: every rank reports LOCAL_RANK, LOCAL_WORLD_SIZE and its pid;
// pids are distinct; the caller's rank has the caller's pid; args arrive intact.
void check_reports(const std::vector<Report>& reports, int n, std::optional<int> caller_rank,
                   const std::vector<std::string>& expected_args) {
    REQUIRE(reports.size() == static_cast<std::size_t>(n));
    std::set<int> pids;
    for (int rank = 0; rank < n; ++rank) {
        const Report& r = reports[static_cast<std::size_t>(rank)];
        CHECK(r.local_rank == rank);
        CHECK(r.local_world_size == n);
        CHECK(r.env_local_rank == std::to_string(rank));
        CHECK(r.env_local_world_size == std::to_string(n));
        CHECK(r.args == expected_args);
        pids.insert(r.pid);
        if (caller_rank == rank) {
            CHECK(r.pid == ::getpid());
        } else {
            CHECK(r.pid != ::getpid());
            // ps shows the program and the rank ("mpify_tests r1", "mpify-worker r2")
            CHECK_THAT(r.process_name, Catch::EndsWith(" r" + std::to_string(rank)));
            CHECK_THAT(r.process_name, !Catch::StartsWith("exe "));
        }
    }
    CHECK(pids.size() == static_cast<std::size_t>(n));
}

}  // namespace

TEST_CASE("every rank reports its rank world size and pid for each n caller rank and args", "[ranch]") {
#ifdef MPIFY_TEST_SANITIZED
    // Arguments or none in turn, not both for each (n, caller rank): each n still meets
    // both. The calls are what costs, and an exec'd worker takes seconds to load LibTorch.
    constexpr bool both_for_each = false;
#else
    constexpr bool both_for_each = true;
#endif
    bool turn = false;
    for (const Host& host : hosts) {
        for (int n : {1, 3}) {
            std::vector<std::optional<int>> caller_ranks{std::nullopt, 0};
            if (n == 3) caller_ranks.push_back(2);
            for (std::optional<int> caller_rank : caller_ranks) {
                turn = !turn;
                for (bool with_args : {false, true}) {
                    if (!both_for_each && with_args != turn) continue;
                    INFO(host.name << ", n=" << n << ", caller_rank="
                                   << (caller_rank ? std::to_string(*caller_rank) : "none") << ", args=" << with_args);
                    mpify::Options options;
                    options.caller_rank = caller_rank;
                    const std::vector<Report> reports =
                        with_args ? mpify::ranch(options, n, host.report_args, "arg_1", 20, "arg_3")
                                  : mpify::ranch(options, n, host.report);
                    check_reports(reports, n, caller_rank,
                                  with_args ? std::vector<std::string>{"arg_1", "20", "arg_3"}
                                            : std::vector<std::string>{});
                    CHECK(mpify_test::has_no_children());
                }
            }
        }
    }
}

TEST_CASE("the README example returns 3 4 5", "[ranch]") {
    CHECK(mpify::ranch(3, in_program::add, 1, 2) == std::vector<int>{3, 4, 5});
    CHECK(mpify::ranch(3, in_library::add, 1, 2) == std::vector<int>{3, 4, 5});
}

TEST_CASE("gather = false returns only the caller's own result", "[ranch]") {
    mpify::Options options;
    options.gather = false;
    options.caller_rank = 2;
    CHECK(mpify::ranch(options, 3, in_program::add, 1, 2) == std::vector<int>{5});
    options.caller_rank = std::nullopt;
    CHECK(mpify::ranch(options, 2, in_library::add, 1, 2).empty());
}

TEST_CASE("a void function runs on every rank", "[ranch]") {
    for (auto touch : {in_program::touch, in_library::touch}) {
        mpify_test::TempDir dir;
        mpify::ranch(3, touch, dir.path());
        for (int rank = 0; rank < 3; ++rank)
            CHECK(std::filesystem::exists(dir.path() + "/rank" + std::to_string(rank)));
    }
}

TEST_CASE("LOCAL_RANK and LOCAL_WORLD_SIZE of the caller are restored afterwards", "[ranch][env]") {
    ::setenv("LOCAL_RANK", "77", 1);
    ::unsetenv("LOCAL_WORLD_SIZE");
    const auto reports = mpify::ranch(2, in_program::report);
    CHECK(reports[0].env_local_rank == "0");
    CHECK(reports[0].env_local_world_size == "2");
    CHECK(std::string(std::getenv("LOCAL_RANK")) == "77");
    CHECK(std::getenv("LOCAL_WORLD_SIZE") == nullptr);
    ::unsetenv("LOCAL_RANK");
    CHECK(mpify::local_rank() == 0);
    CHECK(mpify::local_world_size() == 1);
}

namespace {
volatile sig_atomic_t usr1_seen = 0;
void count_usr1(int) { usr1_seen = usr1_seen + 1; }
}  // namespace

TEST_CASE("workers start with no signal blocked; the caller's mask and handlers stay", "[ranch][signals]") {
    struct sigaction handler{}, before{};
    handler.sa_handler = count_usr1;
    ::sigaction(SIGUSR1, &handler, &before);
    sigset_t usr2, mask_before;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    ::pthread_sigmask(SIG_BLOCK, &usr2, &mask_before);
    // Rank 0 is the caller's thread, which keeps its mask.
    CHECK(mpify::ranch(3, in_library::blocks_signal, SIGUSR2) == std::vector<bool>{true, false, false});
    sigset_t mask_after;
    ::pthread_sigmask(SIG_SETMASK, nullptr, &mask_after);
    CHECK(sigismember(&mask_after, SIGUSR2) == 1);
    CHECK(sigismember(&mask_after, SIGUSR1) == 0);
    const sig_atomic_t seen = usr1_seen;
    ::raise(SIGUSR1);
    CHECK(usr1_seen == seen + 1);
    ::pthread_sigmask(SIG_SETMASK, &mask_before, nullptr);
    ::sigaction(SIGUSR1, &before, nullptr);
}

TEST_CASE("Options::env reaches every rank and is undone in the caller", "[ranch][env]") {
    ::unsetenv("MPIFY_TEST_VAR");
    mpify::Options options;
    options.env["MPIFY_TEST_VAR"] = "hello";
    const auto seen = mpify::ranch(options, 3, in_library::env_of, std::string("MPIFY_TEST_VAR"));
    CHECK(seen == std::vector<std::string>{"hello", "hello", "hello"});
    CHECK(std::getenv("MPIFY_TEST_VAR") == nullptr);
}

TEST_CASE("workers' output reaches the caller line by line prefixed with the rank", "[ranch][relay]") {
    std::ostringstream out, err;
    auto* old_out = std::cout.rdbuf(out.rdbuf());
    auto* old_err = std::cerr.rdbuf(err.rdbuf());
    mpify::Options options;
    options.caller_rank = std::nullopt;
    mpify::ranch(options, 2, in_library::print_lines, 3);
    std::cout.rdbuf(old_out);
    std::cerr.rdbuf(old_err);
    for (int rank = 0; rank < 2; ++rank) {
        const std::string prefix = "[rank " + std::to_string(rank) + "] ";
        for (int i = 0; i < 3; ++i)
            CHECK_THAT(out.str(), Catch::Contains(prefix + "line " + std::to_string(i) + " of rank " +
                                                  std::to_string(rank) + "\n"));
        CHECK_THAT(out.str(), Catch::Contains(prefix + "no newline at the end\n"));
        CHECK_THAT(err.str(), Catch::Contains(prefix + "an error line\n"));
    }
}

TEST_CASE("on_output receives each line with its rank and stream", "[ranch][relay]") {
    std::vector<std::tuple<int, mpify::Stream, std::string>> lines;
    mpify::Options options;
    options.on_output = [&](int rank, mpify::Stream stream, const std::string& line) {
        lines.emplace_back(rank, stream, line);
    };
    mpify::ranch(options, 2, in_program::print_lines, 2);
    using T = std::tuple<int, mpify::Stream, std::string>;
    CHECK(std::count(lines.begin(), lines.end(), T{1, mpify::Stream::out, "line 1 of rank 1"}) == 1);
    CHECK(std::count(lines.begin(), lines.end(), T{1, mpify::Stream::err, "an error line"}) == 1);
    // rank 0 is the caller: its output is its own, not relayed
    CHECK(std::none_of(lines.begin(), lines.end(), [](const T& t) { return std::get<0>(t) == 0; }));
}

TEST_CASE("a context wraps fn in every rank the caller's included", "[ranch][context]") {
    std::vector<std::string> out_lines;
    mpify::Options options;
    options.on_output = [&](int, mpify::Stream, const std::string& line) { out_lines.push_back(line); };
    for (auto fn : {in_program::context_active, in_library::context_active}) {
        out_lines.clear();
        const std::vector<bool> active = mpify::ranch<mpify_test::TestContext>(options, 3, fn);
        CHECK(active == std::vector<bool>{true, true, true});
        CHECK_FALSE(mpify_test::TestContext::active);  // closed again in the caller
        CHECK(std::count(out_lines.begin(), out_lines.end(), "context opened") == 2);
        CHECK(std::count(out_lines.begin(), out_lines.end(), "context closed") == 2);
    }
    CHECK(mpify::ranch(options, 2, in_library::context_active) == std::vector<bool>{false, false});
}
