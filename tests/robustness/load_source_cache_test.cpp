// load_source's cache holds code the process loads: it must be this user's alone, and a
// damaged library in it is rebuilt, not loaded.
#include "support.hpp"

#include <mpify/mpify.hpp>

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

fs::path source_in(const std::string& folder, const std::string& function) {
    const fs::path path = fs::path(folder) / (function + ".cpp");
    std::ofstream(path) << "#include <mpify/mpify.hpp>\nint " << function
                        << "(int x) { return x + 1; }\nMPIFY_REGISTER(" << function << ");\n";
    return path;
}

unsigned mode_of(const fs::path& path) {
    struct stat info{};
    REQUIRE(::stat(path.c_str(), &info) == 0);
    return info.st_mode & 07777;
}

}  // namespace

TEST_CASE("load_source creates its cache folders for this user only", "[robustness][load_source]") {
    mpify_test::TempDir dir;
    mpify::SourceOptions options;
    options.cache_dir = dir.path() + "/new/cache";
    mpify::load_source(source_in(dir.path(), "cache_private_plus_one").string(), options);
    CHECK(mode_of(options.cache_dir) == 0700);
    CHECK(mode_of(options.cache_dir + "/load_source") == 0700);
    CHECK(mode_of(dir.path() + "/new") == 0700);
}

TEST_CASE("load_source refuses a cache folder that other users can write to", "[robustness][load_source]") {
    mpify_test::TempDir dir;
    const std::string cache = dir.path() + "/shared";
    fs::create_directory(cache);
    ::chmod(cache.c_str(), 0777);
    mpify::SourceOptions options;
    options.cache_dir = cache;
    CHECK_THROWS_WITH(mpify::load_source(source_in(dir.path(), "cache_shared_plus_one").string(), options),
                      Contains("refusing the cache folder " + cache) && Contains("other users can write to it"));
    CHECK_FALSE(fs::exists(cache + "/load_source/cache_shared_plus_one.so"));
}

TEST_CASE("load_source refuses a cache folder that belongs to another user", "[robustness][load_source]") {
    if (::geteuid() != 0) {
        WARN("not root: cannot make a folder of another user here");
        return;
    }
    mpify_test::TempDir dir;
    const std::string cache = dir.path() + "/theirs";
    fs::create_directories(cache + "/load_source");
    REQUIRE(::chown(cache.c_str(), 65534, 65534) == 0);
    mpify::SourceOptions options;
    options.cache_dir = cache;
    CHECK_THROWS_WITH(mpify::load_source(source_in(dir.path(), "cache_theirs_plus_one").string(), options),
                      Contains("belongs to user 65534"));
}

TEST_CASE("without HOME or XDG_CACHE_HOME the cache is this user's own folder in TMPDIR", "[robustness][load_source]") {
    mpify_test::TempDir dir;
    const mpify_test::EnvironmentVariable home("HOME", std::nullopt), xdg("XDG_CACHE_HOME", std::nullopt),
        cache("MPIFY_CACHE_DIR", std::nullopt), tmp("TMPDIR", dir.path());
    const std::string mine = dir.path() + "/mpify-cache-" + std::to_string(::geteuid());

    SECTION("created private") {
        mpify::load_source(source_in(dir.path(), "cache_tmp_plus_one").string());
        CHECK(mode_of(mine) == 0700);
    }
    SECTION("planted by someone else first: refused") {
        fs::create_directory(mine);
        ::chmod(mine.c_str(), 0777);
        CHECK_THROWS_WITH(mpify::load_source(source_in(dir.path(), "cache_planted_plus_one").string()),
                          Contains("refusing the cache folder " + mine));
    }
}

TEST_CASE("a damaged cached library is compiled again, not loaded", "[robustness][load_source]") {
    mpify_test::TempDir dir;
    mpify::SourceOptions options;
    options.cache_dir = dir.path() + "/cache";
    const fs::path source = source_in(dir.path(), "cache_damaged_plus_one");
    const std::string library = mpify::load_source(source.string(), options);
    const auto size = fs::file_size(library);

    // The damage goes into a new file renamed over the cached one, as a crashed copy or
    // a full disk would leave it: the library this process loaded stays mapped intact.
    auto damage = [&](auto how) {
        const std::string copy = library + ".damaged";
        fs::copy_file(library, copy, fs::copy_options::overwrite_existing);
        how(copy);
        fs::rename(copy, library);
        return fs::last_write_time(library);
    };
    // Truncated: loading it would die of SIGBUS.
    auto damaged_at = damage([&](const std::string& copy) { fs::resize_file(copy, size / 2); });
    CHECK(mpify::load_source(source.string(), options) == library);
    CHECK(fs::file_size(library) == size);
    CHECK(fs::last_write_time(library) != damaged_at);  // compiled again
    // Same size, other bytes: loading it would die of SIGSEGV.
    damaged_at = damage([&](const std::string& copy) {
        std::fstream file(copy, std::ios::in | std::ios::out | std::ios::binary);
        file.seekp(static_cast<std::streamoff>(size / 2));
        file << std::string(64, '\xff');
    });
    CHECK(mpify::load_source(source.string(), options) == library);
    CHECK(fs::last_write_time(library) != damaged_at);
    CHECK(fs::file_size(library) == size);
}
