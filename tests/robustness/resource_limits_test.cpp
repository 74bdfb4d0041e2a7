// The caller's own resource limits: a call works within them or says why, and never dies
// of them.
#include "functions.hpp"
#include "support.hpp"

#include <mpify/mpify.hpp>

#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <string>

namespace {

// Sets a soft limit for one scope.
class SoftLimit {
public:
    SoftLimit(int resource, rlim_t value) : resource_(resource) {
        REQUIRE(::getrlimit(resource_, &saved_) == 0);
        rlimit lowered = saved_;
        lowered.rlim_cur = value;
        REQUIRE(::setrlimit(resource_, &lowered) == 0);
    }
    ~SoftLimit() { ::setrlimit(resource_, &saved_); }
    SoftLimit(const SoftLimit&) = delete;
    SoftLimit& operator=(const SoftLimit&) = delete;

private:
    int resource_;
    rlimit saved_{};
};

}  // namespace

TEST_CASE("a file size limit below the arguments' size sends them through the channels, the caller alive",
          "[robustness][resources]") {
    const std::string four_mib(4 << 20, 'x');
    SoftLimit file_size(RLIMIT_FSIZE, 1 << 20);  // `ulimit -f 1024`: writing 4 MiB to a file would raise SIGXFSZ
    const std::vector<std::string> back = mpify::ranch(3, in_program::echo_string, four_mib);
    REQUIRE(back.size() == 3);
    for (const std::string& s : back) CHECK(s == four_mib);
    CHECK(mpify_test::has_no_children());
}
