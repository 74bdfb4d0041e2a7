// mpify's shared-memory process group: the backend of a one-machine in_ddp group on the
// CPU (src/ddp/shared_memory_group.hpp). The DDP tests (ddp_test.cpp) train through it
// too; here: each collective's results, calls it hands to Gloo, ranks that call
// different collectives, a rank that dies, and choosing the backend.
#include "ddp_functions.hpp"
#include "support.hpp"

#include <mpify/error.hpp>

#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

using Catch::Contains;

TEST_CASE("a one-machine in_ddp group on the CPU is mpify's shared-memory group unless Gloo is asked for",
          "[ddp][shared_memory]") {
    CHECK(mpify::in_ddp(2, ddp_test::group_backend_name) == "mpify-shared-memory");
    mpify::DdpOptions gloo;
    gloo.backend = mpify::Backend::gloo;
    CHECK(mpify::in_ddp(gloo, 2, ddp_test::group_backend_name) == "gloo");
    // A port asked for: the group may span machines, so Gloo; asking for shared memory
    // then is an error that says why.
    mpify::DdpOptions with_port;
    with_port.port = mpify_test::free_loopback_port();
    CHECK(mpify::in_ddp(with_port, 2, ddp_test::group_backend_name) == "gloo");
    with_port.backend = mpify::Backend::shared_memory;
    CHECK_THROWS_WITH(mpify::in_ddp(with_port, 2, ddp_test::group_backend_name),
                      Contains("Backend::shared_memory serves the ranks of one in_ddp call on one machine"));
}

TEST_CASE("a rank that cannot open the memory in_ddp's caller made for the group sends every rank on to Gloo",
          "[ddp][shared_memory][failure]") {
    // in_ddp's own part around its ranch, with a guard each rank makes itself.
    std::vector<std::string> said;
    mpify::detail::with_rendezvous(
        mpify::DdpOptions{}, mpify::Placement{}, 2, 0, [&](const std::map<std::string, std::string>& environment) {
            mpify::Options options = mpify_test::quiet();
            for (const auto& [name, value] : environment) options.env[name] = value;
            said = mpify::ranch(options, 2, ddp_test::backend_after_a_rank_refused_the_segment, 1);
        });
    CHECK(said == std::vector<std::string>{"gloo 2", "gloo 2"});
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("the shared-memory group's collectives give every rank the right values", "[ddp][shared_memory]") {
    for (int n : {2, 3}) {
        INFO(n << " ranks");
        const std::vector<std::string> wrong = mpify::in_ddp(n, ddp_test::collectives_wrong_on_this_rank);
        for (const std::string& w : wrong) INFO(w);
        CHECK(wrong.empty());
    }
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("the shared-memory group runs a waited-for collective on its caller's thread and starts its own "
          "thread at the first one that is not",
          "[ddp][shared_memory]") {
    for (int n : {2, 3}) {
        INFO(n << " ranks");
        // Rank 0's counts; another rank whose counts differ fails the call, saying them.
        const std::vector<int> counts = mpify::in_ddp(n, ddp_test::threads_as_collectives_go);
        REQUIRE(counts.size() == 4);
        CHECK(counts == std::vector<int>{0, 0, 1, 1});
    }
}

TEST_CASE("ranks that call different collectives are all told so, and the group fails from then on",
          "[ddp][shared_memory][failure]") {
    const std::string said = mpify::in_ddp(3, ddp_test::mismatched_all_reduce);
    CHECK_THAT(said, Contains("ranks called different collectives: rank 0 allreduce of 16 bytes of Float"));
    CHECK_THAT(said, Contains("of 32 bytes of Float"));
    CHECK_THAT(said, Contains("Every rank must make the same collective calls in the same order"));
    CHECK_THAT(said, Contains("| mpify::ddp::barrier: ") && Contains("the group cannot be used any more"));
    CHECK_THAT(said, Contains("ranks made different collective calls at #1: rank 0 allreduce #1"));
    CHECK(mpify::in_ddp(2, ddp_test::allreduce_rank) == 1);  // the next group is a new one
}

TEST_CASE("a rank killed during the shared-memory group's all-reduces fails the call at once, named",
          "[ddp][shared_memory][failure]") {
    mpify::DdpOptions options;
    options.timeout = std::chrono::minutes(1);  // a failure seen only at the timeout would fail below
    const int fds_before = mpify_test::open_fd_count();
    for (int i = 0; i < 3; ++i) {
        INFO("call " << i);
        const auto start = std::chrono::steady_clock::now();
        try {
            mpify::in_ddp(options, mpify_test::quiet(), 3, ddp_test::die_during_large_allreduces, 1 + i % 2);
            FAIL("in_ddp returned");
        } catch (const mpify::WorkerError& e) {
            REQUIRE_FALSE(e.failures().empty());
            CHECK(e.failures().front().rank == 1 + i % 2);
            CHECK(e.failures().front().signal == SIGKILL);
        }
        CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
    }
    CHECK(mpify_test::has_no_children());
    CHECK(mpify_test::open_fd_count() == fds_before);
    CHECK(mpify::in_ddp(2, ddp_test::allreduce_rank) == 1);
}
