// The record of the collective calls (the flight recorder): a rank that skips a call is
// named with the call the others wait in, and ranks that make different calls at the
// same point are told so at once, on mpify's shared-memory group and on Gloo.
#include "ddp_functions.hpp"
#include "support.hpp"

#include <mpify/mpify.hpp>
#include <mpify/torch.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

using Catch::Matchers::Contains;

namespace {

mpify::DdpOptions group_on(const std::string& backend) {
    mpify::DdpOptions options;
    options.backend = backend == "gloo" ? mpify::Backend::gloo : mpify::Backend::shared_memory;
    // A Gloo group left behind by a failed wait ends its threads by then.
    options.timeout = std::chrono::seconds(20);
    return options;
}

}  // namespace

TEST_CASE("a rank that skips an all-reduce: the timeout names it, where it is, and the call the others wait in",
          "[ddp][stacks][record][once]") {
    const std::string backend = GENERATE(as<std::string>{}, "shared_memory", "gloo");
    INFO(backend);
    mpify::Options options = mpify_test::quiet();
    options.timeout = std::chrono::seconds(3);
    options.stop_grace = std::chrono::milliseconds(100);
    try {
        mpify::in_ddp(group_on(backend), options, 3, ddp_test::skip_one_all_reduce, 1);
        FAIL("in_ddp returned");
    } catch (const mpify::TimeoutError& e) {
        INFO(e.what());
        // Ranks 0 and 2 wait in the third all-reduce, rank 1 never came to it.
        CHECK_THAT(e.what(), Contains("their collective calls (mpify's record):"));
        CHECK_THAT(e.what(), Contains("- rank 0 waits in allreduce #3 (mpify::ddp::all_reduce: Float x 1, 4 bytes, "
                                      "SUM) since"));
        CHECK_THAT(e.what(), Contains("- rank 2 waits in allreduce #3"));
        CHECK_THAT(e.what(), Contains("- rank 1 never entered #3: its last was allreduce #2 (mpify::ddp::all_reduce"));
        CHECK_THAT(e.what(), Contains("; it is in in_library::spin_in_own_loop() at functions.cpp:"));
        CHECK_THAT(e.what(), Contains("<- ddp_test::skip_one_all_reduce(...) at ddp_functions.cpp:"));
        bool rank1_read = false;
        for (const mpify::RankFailure& f : e.failures()) {
            if (f.rank != 1) continue;
            rank1_read = true;
            REQUIRE(f.stack.collectives.size() == 2);
            CHECK(f.stack.collectives.back().sequence == 2);
            CHECK(f.stack.collectives.back().ended);
            CHECK(f.stack.collectives.back().operation == "allreduce");
        }
        CHECK(rank1_read);
    }
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("ranks that make different collective calls are all told so at once, naming both calls",
          "[ddp][record][failure][once]") {
    const std::string backend = GENERATE(as<std::string>{}, "shared_memory", "gloo");
    const std::string how = GENERATE(as<std::string>{}, "size", "operation");
    INFO(backend << ", different " << how);
    mpify::Options options = mpify_test::quiet();
    // Told at once: neither the call's timeout nor the group's (20 s) ends the waits.
    options.timeout = std::chrono::seconds(15);
    const std::string said = mpify::in_ddp(group_on(backend), options, 2, ddp_test::mismatched_call, how);
    CHECK_THAT(said, Contains("ranks made different collective calls at #1: rank 0 allreduce #1 "
                              "(mpify::ddp::all_reduce: Float x 1048576, 4.0 MiB, SUM), rank 1 "));
    if (how == "size")
        CHECK_THAT(said, Contains("rank 1 allreduce #1 (mpify::ddp::all_reduce: Float x 2097152, 8.0 MiB"));
    else
        CHECK_THAT(said,
                   Contains("rank 1 broadcast #1 (mpify::ddp::broadcast: Float x 1048576, 4.0 MiB, from rank 0)"));
    CHECK(mpify::in_ddp(2, ddp_test::allreduce_rank) == 1);  // the next group is a new one
    CHECK(mpify_test::has_no_children());
}
