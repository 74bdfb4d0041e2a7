// A library's journey to another machine, both ends in one process over a socket pair:
// the caller's deliver_library (spawn/library_shipping.hpp) against an agent's
// answer_library_offer (worker/shipped_library.hpp) with its cache in a private folder.
// The machine's view of the caller's path is this process's own, so "not on that
// machine" is a path that does not exist; the multi-machine test (remote_ranks_test.py)
// hides the caller's files from a real agent.
#include "common/content_hash.hpp"
#include "common/scoped_environment.hpp"
#include "common/unique_fd.hpp"
#include "spawn/library_shipping.hpp"
#include "worker/shipped_library.hpp"

#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <string>
#include <vector>

using namespace mpify::detail;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

struct Folder {
    fs::path path;
    Folder() {
        std::string pattern = (fs::temp_directory_path() / "mpify-shipping-XXXXXX").string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        path = pattern;
    }
    ~Folder() {
        std::error_code ignored;
        fs::remove_all(path, ignored);
    }
};

void write_file(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Bytes of many link messages' worth, not all alike.
std::string library_bytes(std::size_t size, char seed) {
    std::string bytes(size, '\0');
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(seed + i * 131 + (i >> 12));
    return bytes;
}

struct Exchange {
    LibraryDelivery delivery;   // the caller's view
    std::string agent_path;     // what the agent's worker would load
    std::string caller_error, agent_error;
};

// Offers `offer` from a caller to an agent over a socket pair, and what each end made of
// it. The agent's machine knows the library's path as `path_there` (another file, or
// none: a machine without the caller's files).
Exchange offer_to_agent(const LibraryOffer& offer, const std::string& path_there) {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    UniqueFd caller_end(fds[0]), agent_end(fds[1]);
    Exchange result;
    auto agent = std::async(std::launch::async, [&] {
        try {
            const LinkMessage message =
                receive_link_message(agent_end.get(), Clock::now() + std::chrono::seconds(10), "the offer");
            LibraryOffer offered = decode_offer(message.payload);
            offered.path = path_there;
            result.agent_path = answer_library_offer(agent_end.get(), offered, std::chrono::seconds(10));
        } catch (const std::exception& e) {
            result.agent_error = e.what();
        }
        agent_end.reset();
    });
    try {
        result.delivery = deliver_library(caller_end.get(), offer, Clock::now() + std::chrono::seconds(20));
    } catch (const std::exception& e) {
        result.caller_error = e.what();
    }
    agent.get();
    return result;
}

std::vector<std::string> names_in(const fs::path& folder) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder)) names.push_back(entry.path().filename().string());
    return names;
}

unsigned mode_of(const fs::path& path) {
    struct stat info{};
    REQUIRE(::lstat(path.c_str(), &info) == 0);
    return info.st_mode & 07777;
}

}  // namespace

TEST_CASE("a library the agent's machine has at its path is used there, one it lacks is shipped into its cache "
          "once, read-only, named by its hash, and a stale or damaged copy is not used",
          "[shipping]") {
    Folder folder;
    const fs::path cache = folder.path / "cache";
    const ScopedEnvironment cache_variable({{"MPIFY_CACHE_DIR", cache.string()}});
    const std::string bytes = library_bytes(2'500'000, 7);  // three link messages
    const fs::path library = folder.path / "libfunctions.so";
    write_file(library, bytes);
    const LibraryOffer offer = offer_library(library.string());
    CHECK(offer.size == bytes.size());
    CHECK(offer.hash == content_hash_of_file(library.string()));
    const std::string nowhere = (folder.path / "not-on-that-machine" / "libfunctions.so").string();

    const Exchange same = offer_to_agent(offer, library.string());
    REQUIRE(same.caller_error.empty());
    CHECK(same.delivery.here.how == LibraryHere::at_its_path);
    CHECK(same.delivery.bytes_sent == 0);
    CHECK(same.agent_path == library.string());
    CHECK_FALSE(fs::exists(cache / "shipped"));  // nothing cached when nothing travelled

    const Exchange first = offer_to_agent(offer, nowhere);
    REQUIRE(first.caller_error.empty());
    const fs::path copy = cache / "shipped" / (hex_digits(offer.hash) + ".so");
    CHECK(first.delivery.here.how == LibraryHere::shipped);
    CHECK(first.delivery.bytes_sent == bytes.size());
    CHECK(first.agent_path == copy.string());
    CHECK(first.delivery.here.path == copy.string());
    CHECK(read_file(copy) == bytes);
    CHECK(mode_of(copy) == 0500);
    CHECK(mode_of(cache / "shipped") == 0700);
    CHECK(names_in(cache / "shipped") == std::vector<std::string>{copy.filename().string()});

    const Exchange again = offer_to_agent(offer, nowhere);
    REQUIRE(again.caller_error.empty());
    CHECK(again.delivery.here.how == LibraryHere::in_cache);
    CHECK(again.delivery.bytes_sent == 0);
    CHECK(again.agent_path == copy.string());

    // A stale file at the path there (another build of the library): the cached copy.
    const fs::path stale = folder.path / "stale.so";
    write_file(stale, library_bytes(bytes.size(), 8));
    const Exchange over_stale = offer_to_agent(offer, stale.string());
    REQUIRE(over_stale.caller_error.empty());
    CHECK(over_stale.delivery.here.how == LibraryHere::in_cache);
    CHECK(over_stale.agent_path == copy.string());

    // The cached copy damaged (same size, other bytes): shipped again over it.
    fs::permissions(copy, fs::perms::owner_write, fs::perm_options::add);
    write_file(copy, library_bytes(bytes.size(), 9));
    fs::permissions(copy, fs::perms::owner_write, fs::perm_options::remove);
    const Exchange repaired = offer_to_agent(offer, nowhere);
    REQUIRE(repaired.caller_error.empty());
    CHECK(repaired.delivery.here.how == LibraryHere::shipped);
    CHECK(read_file(copy) == bytes);
    CHECK(names_in(cache / "shipped") == std::vector<std::string>{copy.filename().string()});
}

TEST_CASE("a library that changes while it travels is refused by the agent, which keeps no part of it, and a cache "
          "folder others can write is refused",
          "[shipping]") {
    Folder folder;
    const fs::path cache = folder.path / "cache";
    const ScopedEnvironment cache_variable({{"MPIFY_CACHE_DIR", cache.string()}});
    const fs::path library = folder.path / "libchanging.so";
    write_file(library, library_bytes(1'500'000, 1));
    const LibraryOffer offer = offer_library(library.string());
    write_file(library, library_bytes(1'500'000, 2));  // rebuilt after the offer was made
    const std::string nowhere = (folder.path / "absent.so").string();

    const Exchange changed = offer_to_agent(offer, nowhere);
    CHECK_THAT(changed.caller_error, Contains("do not have the hash offered"));
    CHECK_THAT(changed.agent_error, Contains("do not have the hash offered") && Contains("on "));
    CHECK(names_in(cache / "shipped").empty());  // no half-written or unchecked file
    CHECK(offer_library(library.string()).hash == content_hash_of_file(library.string()));  // offered anew

    fs::permissions(cache, fs::perms::others_write, fs::perm_options::add);
    const Exchange open_cache = offer_to_agent(offer_library(library.string()), nowhere);
    CHECK_THAT(open_cache.caller_error, Contains("refusing the cache folder") && Contains(cache.string()) &&
                                            Contains("other users can write to it"));
}

TEST_CASE("an agent remembers a library's hash while the file stays the same version, and not a moment longer",
          "[shipping]") {
    Folder folder;
    const fs::path cache = folder.path / "cache";
    const ScopedEnvironment cache_variable({{"MPIFY_CACHE_DIR", cache.string()}});
    const std::string bytes = library_bytes(300'000, 3);
    const fs::path library = folder.path / "libfunctions.so";
    write_file(library, bytes);
    const LibraryOffer offer = offer_library(library.string());

    CHECK(offer_to_agent(offer, library.string()).delivery.here.how == LibraryHere::at_its_path);
    const std::vector<std::string> records = names_in(cache / "hashes");
    REQUIRE(records.size() == 1);
    const fs::path record = cache / "hashes" / records.front();
    CHECK(mode_of(record) == 0600);
    CHECK(mode_of(cache / "hashes") == 0700);
    const std::string remembered = read_file(record);
    CHECK_THAT(remembered, Contains(hex_digits(offer.hash)));

    // What the record says is what the agent goes by while the file is unchanged: a
    // record of another hash makes it send for the library.
    std::string other = remembered;
    other.replace(other.find(hex_digits(offer.hash)), 4, "0000");
    fs::permissions(record, fs::perms::owner_write, fs::perm_options::add);
    write_file(record, other);
    CHECK(offer_to_agent(offer, library.string()).delivery.here.how == LibraryHere::shipped);

    // Rewritten in place with the same size and its modification time put back: the
    // change time tells, and the agent hashes it again.
    write_file(record, remembered);
    struct stat before{};
    REQUIRE(::stat(library.c_str(), &before) == 0);
    write_file(library, library_bytes(bytes.size(), 4));
    const timespec times[2] = {before.st_atim, before.st_mtim};
    REQUIRE(::utimensat(AT_FDCWD, library.c_str(), times, 0) == 0);
    const Exchange rewritten = offer_to_agent(offer, library.string());
    CHECK(rewritten.delivery.here.how == LibraryHere::in_cache);  // the shipped copy, not the changed file
    CHECK_THAT(read_file(record), !Contains(hex_digits(offer.hash)));  // remembered anew
}

TEST_CASE("the link's library messages are read back as written, and malformed ones are refused", "[shipping]") {
    const LibraryOffer offer{"/opt/lib/libf.so", 1234, std::string(ContentHash::size, 'h')};
    const LibraryOffer read = decode_offer(encode_offer(offer));
    CHECK(read.path == offer.path);
    CHECK(read.size == offer.size);
    CHECK(read.hash == offer.hash);
    CHECK_THROWS_WITH(decode_offer(encode_offer({"/opt/lib/libf.so", 1, "short"})), Contains("hash of 5 bytes"));
    CHECK_THROWS_WITH(decode_offer(encode_offer({"relative.so", 1, offer.hash})), Contains("no absolute path"));
    CHECK_THROWS(decode_offer(encode_offer(offer).substr(3)));
    const LibraryHere here = decode_here(encode_here({LibraryHere::in_cache, "/c/x.so"}));
    CHECK(here.how == LibraryHere::in_cache);
    CHECK(here.path == "/c/x.so");
    std::string bad = encode_here(here);
    bad[0] = 9;
    CHECK_THROWS_WITH(decode_here(bad), Contains("means nothing"));
}
