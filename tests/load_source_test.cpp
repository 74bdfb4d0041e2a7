// mpify::load_source: a file compiled into a cached library whose functions ranch runs.
#include "support.hpp"

#include <mpify/mpify.hpp>

#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <filesystem>
#include <fstream>

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

const char* squares_source = R"(
#include <mpify/mpify.hpp>
extern "C" int load_source_square(int x) { return x * x + mpify::local_rank(); }
MPIFY_REGISTER(load_source_square);
)";

}  // namespace

TEST_CASE("load_source compiles a file once and ranch runs its registered function", "[load_source]") {
    mpify_test::TempDir dir;
    const fs::path source = fs::path(dir.path()) / "square.cpp";
    write(source, squares_source);
    mpify::SourceOptions options;
    options.cache_dir = dir.path() + "/cache";

    const std::string library = mpify::load_source(source.string(), options);
    CHECK(fs::exists(library));
    auto* square = reinterpret_cast<int (*)(int)>(::dlsym(RTLD_DEFAULT, "load_source_square"));
    REQUIRE(square != nullptr);
    CHECK(mpify::ranch(3, square, 4) == std::vector<int>{16, 17, 18});
    CHECK(mpify_test::has_no_children());

    // Unchanged content: the cached library, not a new compilation.
    const auto built = fs::last_write_time(library);
    CHECK(mpify::load_source(source.string(), options) == library);
    CHECK(fs::last_write_time(library) == built);

    // New content: a new library.
    write(source, std::string(squares_source) + "// changed\n");
    CHECK(mpify::load_source(source.string(), options) != library);
}

TEST_CASE("load_source reports the compiler's message when the file does not compile", "[load_source][usage]") {
    mpify_test::TempDir dir;
    const fs::path source = fs::path(dir.path()) / "broken.cpp";
    write(source, "int broken() { return undeclared_name; }\n");
    mpify::SourceOptions options;
    options.cache_dir = dir.path() + "/cache";
    CHECK_THROWS_AS(mpify::load_source(source.string(), options), mpify::CompileError);
    CHECK_THROWS_WITH(mpify::load_source(source.string(), options),
                      Contains("broken.cpp does not compile") && Contains("undeclared_name"));
}

TEST_CASE("load_source of a missing file is a usage error naming it", "[load_source][usage]") {
    CHECK_THROWS_AS(mpify::load_source("/nonexistent/notebook_cell.cpp"), mpify::UsageError);
    CHECK_THROWS_WITH(mpify::load_source("/nonexistent/notebook_cell.cpp"),
                      Contains("no file /nonexistent/notebook_cell.cpp"));
}
