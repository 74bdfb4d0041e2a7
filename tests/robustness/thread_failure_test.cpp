// A process that cannot start one more thread (out of memory, or at its thread limit):
// ranch needs one to watch the workers while the caller runs its own rank. The call must
// fail as an mpify::Error that says so, with every worker stopped and reaped.
#include "functions.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <pthread.h>

#include <cstddef>
#include <system_error>

namespace {

// While it exists, every new thread of this process asks for a stack larger than its
// address space, so that creating one fails (EAGAIN).
class NoNewThreads {
public:
    NoNewThreads() {
        REQUIRE(::pthread_getattr_default_np(&saved_) == 0);
        pthread_attr_t huge;
        REQUIRE(::pthread_attr_init(&huge) == 0);
        // 128 TiB: all the address space a process has (x86-64, without a hint), so no
        // mapping can hold it, whatever the machine's overcommit policy.
        REQUIRE(::pthread_attr_setstacksize(&huge, std::size_t{1} << 47) == 0);
        REQUIRE(::pthread_setattr_default_np(&huge) == 0);
        ::pthread_attr_destroy(&huge);
    }
    ~NoNewThreads() {
        ::pthread_setattr_default_np(&saved_);
        ::pthread_attr_destroy(&saved_);
    }

private:
    pthread_attr_t saved_;
};

}  // namespace

TEST_CASE("a call that cannot start a thread fails with an mpify::Error and leaves no worker", "[robustness]") {
    // Whatever lasts between calls (the warm template and the thread that starts it) is
    // made first: this call is the one that needs a new thread.
    REQUIRE(mpify::ranch(2, in_program::add, 1, 2) == std::vector<int>{3, 4});
    try {
        NoNewThreads no_threads;
        mpify::ranch(2, in_program::add, 1, 2);
        FAIL("ranch returned without the thread it needs");
    } catch (const mpify::Error& e) {
        CHECK_THAT(e.what(), Catch::Contains("mpify::ranch(add, n=2): could not start the thread that watches the "
                                             "workers"));
        CHECK_THROWS_AS(std::rethrow_if_nested(e), std::system_error);
    }
    CHECK(mpify_test::has_no_children());
    // And the next call, with threads to spare, works.
    CHECK(mpify::ranch(2, in_program::add, 1, 2) == std::vector<int>{3, 4});
}
