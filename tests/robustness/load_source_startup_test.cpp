// A library's start-up runs in a trial process before the caller loads it: a static
// initializer that throws or exits costs an error, never the caller (a notebook's kernel).
#include "support.hpp"

#include <mpify/mpify.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A source whose static initializer does `start_up` (a statement) when it is loaded.
std::string load_source_starting_with(const mpify_test::TempDir& dir, const std::string& name,
                                      const std::string& start_up) {
    const fs::path source = fs::path(dir.path()) / (name + ".cpp");
    std::ofstream(source) << "#include <csignal>\n#include <cstdio>\n#include <cstdlib>\n#include <stdexcept>\n"
                          << "static int started = [] { " << start_up << "; return 1; }();\n"
                          << "extern \"C\" int " << name << "_started() { return started; }\n";
    mpify::SourceOptions options;
    options.cache_dir = dir.path() + "/cache";
    return mpify::load_source(source.string(), options);
}

}  // namespace

TEST_CASE("a library whose start-up throws is an error naming it, and the caller lives on",
          "[load_source][robustness][once]") {
    mpify_test::TempDir dir;
    const auto load = [&] {
        load_source_starting_with(dir, "throws_at_start", "throw std::runtime_error(\"no config file\")");
    };
    CHECK_THROWS_AS(load(), mpify::Error);
    CHECK_THROWS_WITH(load(), Contains("throws_at_start.cpp") && Contains("threw an exception") &&
                                  Contains("no config file") && Contains("not loaded into this one"));
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a library whose start-up calls exit is an error with its status, and the caller lives on",
          "[load_source][robustness][once]") {
    mpify_test::TempDir dir;
    CHECK_THROWS_WITH(load_source_starting_with(dir, "exits_at_start", "std::puts(\"giving up\"); std::exit(3)"),
                      Contains("exits_at_start.cpp") && Contains("exit status 3") && Contains("giving up"));
    CHECK_THROWS_WITH(load_source_starting_with(dir, "crashes_at_start", "std::raise(SIGSEGV)"),
                      // "SIGSEGV" as mpify names the signal; "SEGV" as a sanitizer
                      // runtime that catches it first (and exits 1) reports it.
                      Contains("crashes_at_start.cpp") && Contains("SEGV"));
}

TEST_CASE("a library that starts cleanly is tried once, then loaded straight from the cache",
          "[load_source][robustness][once]") {
    mpify_test::TempDir dir;
    const std::string library = load_source_starting_with(dir, "starts_fine", "std::puts(\"started\")");
    const fs::path marker = library + ".started";
    REQUIRE(fs::exists(marker));
    const auto tried_at = fs::last_write_time(marker);
    CHECK(load_source_starting_with(dir, "starts_fine", "std::puts(\"started\")") == library);
    CHECK(fs::last_write_time(marker) == tried_at);
}
