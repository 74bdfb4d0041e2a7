// mpify::load_source: a file compiled into a cached library whose functions ranch runs.
#include "support.hpp"

#include <mpify/mpify.hpp>

#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <thread>

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

TEST_CASE("a file edited and loaded again runs its new code in every rank, three times over", "[load_source]") {
    mpify_test::TempDir dir;
    const fs::path source = fs::path(dir.path()) / "edited.cpp";
    mpify::SourceOptions options;
    options.cache_dir = dir.path() + "/cache";
    using Function = int (*)(int);
    for (int version = 1; version <= 3; ++version) {
        INFO("version " << version);
        write(source, "#include <mpify/mpify.hpp>\n"
                      "int load_source_edited(int x) { return " +
                          std::to_string(version * 100) +
                          " + x + mpify::local_rank(); }\n"
                          "MPIFY_REGISTER(load_source_edited);\n");
        const std::string library = mpify::load_source(source.string(), options);
        void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
        REQUIRE(handle != nullptr);
        // The new library's own symbol, and what an interpreter is told is the newest:
        // the same function, registered as itself.
        auto* own = reinterpret_cast<Function>(::dlsym(handle, "_Z18load_source_editedi"));
        auto* newest = reinterpret_cast<Function>(mpify_newest_source_function("_Z18load_source_editedi"));
        ::dlclose(handle);
        REQUIRE(own != nullptr);
        CHECK(newest == own);
        const int base = version * 100 + 5;
        CHECK(mpify::ranch(3, own, 5) == std::vector<int>{base, base + 1, base + 2});
    }
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("load_source from several threads at once loads the library or says why", "[load_source]") {
    mpify_test::TempDir dir;
    const fs::path source = fs::path(dir.path()) / "threads.cpp";
    write(source, squares_source);
    mpify::SourceOptions options;
    options.cache_dir = dir.path() + "/cache";
    std::vector<std::string> libraries(4);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < libraries.size(); ++i)
        threads.emplace_back([&, i] {
            try {
                libraries[i] = mpify::load_source(source.string(), options);
            } catch (const std::exception& e) {  // a failure of the test, not a crash of it
                libraries[i] = std::string("threw: ") + e.what();
            }
        });
    for (std::thread& t : threads) t.join();
    for (const std::string& library : libraries) CHECK(library == libraries.front());
    CHECK(fs::exists(libraries.front()));
    // Only the library, its fingerprint and the mark of its clean start are left: no
    // partial file or log of a thread.
    std::size_t files = 0;
    for (const auto& entry : fs::directory_iterator(dir.path() + "/cache/load_source"))
        files += entry.is_regular_file();
    CHECK(files == 3);
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
