// common/'s shared pieces on their own: the byte codec every message of mpify uses, the
// poll set every loop waits through, and what the loader has loaded.
#include "common/byte_codec.hpp"
#include "common/object_locator.hpp"
#include "common/poll_set.hpp"
#include "common/printable.hpp"
#include "common/unique_fd.hpp"

#include <catch2/catch.hpp>

#include <c10/core/CPUAllocator.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

using namespace mpify::detail;
using Reader = ByteReader<std::invalid_argument>;

TEST_CASE("printable writes out control characters and leaves text, and its own output, as it is", "[common]") {
    CHECK(printable("plain text, ünïcödé, tabs\tand\nnewlines") == "plain text, ünïcödé, tabs\tand\nnewlines");
    CHECK(printable("\x1b[31mred\x07\r\x7f") == "\\x1b[31mred\\x07\\x0d\\x7f");
    CHECK(printable(std::string("a\0b", 3)) == "a\\x00b");
    CHECK(printable("\xc2\x9b"
                    "1m \xc2\xa0") == "\\u009b1m \xc2\xa0");  // a C1 CSI; a no-break space stays
    const std::string once = printable("\x1b]0;title\x07");
    CHECK(printable(once) == once);
}

TEST_CASE("the byte codec reads back what it wrote, little-endian whatever the machine", "[common]") {
    ByteWriter w;
    w.u8(0xab);
    w.u32(0x01020304);
    w.u64(0x1122334455667788ull);
    w.i64(-2);
    w.str(std::string("with\0nul", 8));
    const std::string bytes = w.take();
    CHECK(bytes.substr(1, 4) == std::string("\x04\x03\x02\x01", 4));
    Reader r(bytes, "a test message");
    CHECK(r.u8("a") == 0xab);
    CHECK(r.u32("b") == 0x01020304u);
    CHECK(r.u64("c") == 0x1122334455667788ull);
    CHECK(r.i64("d") == -2);
    CHECK(r.str("e") == std::string("with\0nul", 8));
    CHECK(r.left() == 0);
    CHECK(r.position() == bytes.size());
    CHECK_NOTHROW(r.expect_end());
}

TEST_CASE("the byte codec refuses to read past the end, counts the rest cannot hold, and bytes left over", "[common]") {
    ByteWriter w;
    w.u32(1000);  // a string of 1000 bytes announced, 3 present
    const std::string bytes = w.take() + "abc";
    Reader truncated(bytes, "a test message");
    CHECK_THROWS_WITH(truncated.str("the name"),
                      Catch::Contains("a test message: the name needs 1000 bytes but 3 are left"));

    ByteWriter counted;
    counted.u32(5);  // five items of at least 4 bytes announced in 8 bytes
    const std::string five_in_eight = counted.take() + "12345678";  // a reader views its bytes: they must live
    Reader too_many(five_in_eight, "a list");
    CHECK_THROWS_WITH(too_many.count("items", 4, 100), Catch::Contains("a list announces 5 items in 8 bytes"));

    ByteWriter limited;
    limited.u32(3);
    const std::string three_over_two = limited.take() + std::string(64, 'x');
    Reader over_limit(three_over_two, "a list");
    CHECK_THROWS_AS(over_limit.count("items", 4, 2), std::invalid_argument);

    Reader trailing("xyz", "a short message");
    CHECK(trailing.u8("x") == 'x');
    CHECK_THROWS_WITH(trailing.expect_end(), Catch::Contains("2 bytes after its last field"));
}

TEST_CASE("a poll set reports the ready fd, skips a negative one, and ends a wait at its deadline", "[common]") {
    int pipe_fds[2];
    REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
    const UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
    PollSet set;
    const std::size_t skipped = set.add(-1, POLLIN);
    const std::size_t readable = set.add(read_end.get(), POLLIN);

    const Clock::time_point started = Clock::now();
    CHECK(set.wait(started + std::chrono::milliseconds(30)) == 0);  // nothing written yet
    CHECK(Clock::now() - started >= std::chrono::milliseconds(30));
    CHECK(set.revents(readable) == 0);

    REQUIRE(::write(write_end.get(), "x", 1) == 1);
    CHECK(set.wait(std::nullopt) == 1);
    CHECK((set.revents(readable) & POLLIN) != 0);
    CHECK(set.revents(skipped) == 0);
    CHECK(set.wait(Clock::now() - std::chrono::seconds(1)) == 1);  // a past deadline: a look, no wait

    CHECK(sooner(std::nullopt, started) == started);
    CHECK(sooner(started + std::chrono::seconds(1), started) == started);
    CHECK_FALSE(sooner(std::nullopt, std::nullopt));
}

TEST_CASE("a library loaded as a dependency is loaded under its real path too, a copy of it is not", "[common]") {
    // LibTorch's c10: loaded with this program, under the name its soname gives.
    const ObjectLocation c10 = locate_object(reinterpret_cast<const void*>(&c10::GetCPUAllocator));
    REQUIRE(c10.found);
    CHECK(is_loaded(c10.path));  // the real path (locate_object resolves links)

    char folder[] = "/tmp/mpify-is-loaded-XXXXXX";
    REQUIRE(::mkdtemp(folder) != nullptr);
    const std::string copy = std::string(folder) + c10.path.substr(c10.path.rfind('/'));
    REQUIRE(std::filesystem::copy_file(c10.path, copy));
    CHECK_FALSE(is_loaded(copy));  // same name, another file
    ::unlink(copy.c_str());
    ::rmdir(folder);
    CHECK_FALSE(is_loaded(copy));  // no file at all
}
