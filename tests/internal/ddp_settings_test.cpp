// A rank's group settings, read from the variables in_ddp gives it: what the caller
// prepares for its ranks (environment_for) is what each rank's guard reads back, and the
// caller can read it the same way before the ranks start.
#include "ddp/ddp_settings.hpp"

#include <mpify/error.hpp>

#include <catch2/catch.hpp>

#include <map>
#include <string>

using Catch::Contains;
using mpify::detail::DdpSettings;
using mpify::detail::environment_for;
using mpify::detail::GroupPlace;
using mpify::detail::segment_var;
using mpify::detail::settings_from_variables;

namespace {

// What local rank `local_rank` of `n` finds: `variables` and ranch's own two, nothing
// from this process's environment.
DdpSettings settings_of_rank(const std::map<std::string, std::string>& variables, int local_rank, int n) {
    const std::string rank = std::to_string(local_rank);
    const std::string ranks = std::to_string(n);
    return settings_from_variables([&](const char* name) -> const char* {
        if (std::string(name) == "LOCAL_RANK") return rank.c_str();
        if (std::string(name) == "LOCAL_WORLD_SIZE") return ranks.c_str();
        const auto found = variables.find(name);
        return found == variables.end() ? nullptr : found->second.c_str();
    });
}

}  // namespace

TEST_CASE("each rank reads back the settings its caller gave every rank") {
    mpify::DdpOptions options;
    options.backend = mpify::Backend::shared_memory;
    options.timeout = std::chrono::milliseconds(1234);
    GroupPlace place;
    place.base_rank = 4;
    place.world_size = 7;
    std::map<std::string, std::string> variables = environment_for(options, place, "unix:@mpify-test", 0);
    variables[segment_var] = "1 2 3 4 5 6";
    for (int local = 0; local < 3; ++local) {
        const DdpSettings s = settings_of_rank(variables, local, 3);
        CHECK(s.rank == 4 + local);
        CHECK(s.local_rank == local);
        CHECK(s.local_world_size == 3);
        CHECK(s.world_size == 7);
        CHECK(s.backend == mpify::Backend::shared_memory);
        CHECK(s.timeout == std::chrono::milliseconds(1234));
        CHECK(s.store == "unix:@mpify-test");
        CHECK(s.port == 0);
        CHECK(s.segment == "1 2 3 4 5 6");
    }
}

TEST_CASE("a segment is read only for ranks that meet at a UNIX socket, and none is inherited") {
    mpify::DdpOptions options;
    GroupPlace place;
    place.world_size = 2;
    std::map<std::string, std::string> over_tcp = environment_for(options, place, "tcp:127.0.0.1:5000", 5000);
    over_tcp[segment_var] = "1 2 3 4 5 6";
    CHECK(settings_of_rank(over_tcp, 1, 2).segment.empty());
    // environment_for names the variable, empty, so that an outer call's never reaches the ranks.
    const std::map<std::string, std::string> fresh = environment_for(options, place, "unix:@mpify-test", 0);
    REQUIRE(fresh.count(segment_var) == 1);
    CHECK(settings_of_rank(fresh, 0, 2).segment.empty());
}

TEST_CASE("a malformed variable from the lookup is refused by name") {
    mpify::DdpOptions options;
    GroupPlace place;
    place.world_size = 2;
    std::map<std::string, std::string> variables = environment_for(options, place, "unix:@mpify-test", 0);
    variables["MPIFY_DDP_TIMEOUT_MS"] = "soon";
    CHECK_THROWS_AS(settings_of_rank(variables, 0, 2), mpify::UsageError);
    CHECK_THROWS_WITH(settings_of_rank(variables, 0, 2), Contains("MPIFY_DDP_TIMEOUT_MS='soon'"));
    variables.erase("MPIFY_DDP_TIMEOUT_MS");
    variables.erase("MASTER_ADDR");
    CHECK_THROWS_WITH(settings_of_rank(variables, 0, 2), Contains("lacks MASTER_ADDR"));
}
