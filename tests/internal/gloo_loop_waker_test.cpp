// Gloo's connection loop nudged (ddp/gloo_loop_waker.hpp): the waker's eventfd is in the
// epoll set of the device's loop while the waker lives and leaves it with the waker, and
// a Nudging scope writes to it until the scope ends. (What the nudges buy, a group
// formed and closed without waiting for the loop's 10 ms turns, is measured by
// benchmarks/spawn_bench.cpp, not asserted here.)
#include "common/clock.hpp"
#include "ddp/backends/gloo/gloo_loop_waker.hpp"
#include "worker/fork_for_parent.hpp"  // thread_count
#include "thread_count_settling.hpp"  // tests/

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

using mpify::detail::GlooLoopWaker;
using mpify::detail::thread_count;

namespace {

// The lines of /proc/self/fdinfo/<fd>.
std::string fdinfo(int fd) {
    std::ifstream file("/proc/self/fdinfo/" + std::to_string(fd));
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
}

// How many epoll sets of this process watch `fd` (an fdinfo line "tfd: <fd> events: ...").
int epoll_sets_watching(int fd) {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::istringstream lines(fdinfo(std::stoi(entry.path().filename().string())));
        for (std::string line; std::getline(lines, line);) {
            std::istringstream words(line);
            std::string tag;
            int watched = -1;
            if (words >> tag >> watched && tag == "tfd:" && watched == fd) ++count;
        }
    }
    return count;
}

// The count an eventfd holds ("eventfd-count: <hex>" in its fdinfo).
std::uint64_t eventfd_count(int fd) {
    std::istringstream lines(fdinfo(fd));
    for (std::string line; std::getline(lines, line);)
        if (line.rfind("eventfd-count:", 0) == 0) return std::stoull(line.substr(line.find(':') + 1), nullptr, 16);
    FAIL("no eventfd-count in the fdinfo of fd " << fd);
    return 0;
}

}  // namespace

// Each case that makes a device waits, at its end, for the device's loop thread to leave
// the process: the next case counts threads from there.
TEST_CASE("a Gloo device's loop watches the waker's eventfd until the waker ends", "[gloo_loop_waker]") {
    const int threads_at_start = thread_count();
    {
        const auto device = c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
        int descriptor = -1;
        {
            const GlooLoopWaker waker(device);
            descriptor = waker.wake_descriptor();
            REQUIRE(descriptor >= 0);
            CHECK(epoll_sets_watching(descriptor) == 1);
        }
        CHECK(epoll_sets_watching(descriptor) == 0);
    }
    CHECK(mpify_test::count_settled_at_most(thread_count, threads_at_start) == threads_at_start);
}

TEST_CASE("a nudging scope wakes the loop again and again, on a thread that ends with it", "[gloo_loop_waker]") {
    const int threads_at_start = thread_count();
    {
        const auto device = c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
        const GlooLoopWaker waker(device);
        const int descriptor = waker.wake_descriptor();
        REQUIRE(eventfd_count(descriptor) == 0);
        const int threads_before = thread_count();
        {
            const GlooLoopWaker::Nudging nudging = waker.nudge();
            // Several nudges: the thread keeps nudging, it does not stop after one. The
            // deadline only bounds a failure.
            const auto deadline = mpify::detail::Clock::now() + std::chrono::seconds(10);
            while (eventfd_count(descriptor) < 3 && mpify::detail::Clock::now() < deadline) std::this_thread::yield();
            CHECK(eventfd_count(descriptor) >= 3);
            CHECK(thread_count() == threads_before + 1);
        }
        CHECK(mpify_test::count_settled_at_most(thread_count, threads_before) == threads_before);  // joined
    }
    CHECK(mpify_test::count_settled_at_most(thread_count, threads_at_start) == threads_at_start);
}

TEST_CASE("a waker without a TCP device nudges nothing", "[gloo_loop_waker]") {
    const GlooLoopWaker waker(nullptr);
    CHECK(waker.wake_descriptor() == -1);
    const int threads_before = thread_count();
    const GlooLoopWaker::Nudging nudging = waker.nudge();
    CHECK(thread_count() == threads_before);
}

TEST_CASE("a waker that holds a device's last reference ends the device and its loop's thread", "[gloo_loop_waker]") {
    // The Gloo inside LibTorch 2.x ends its loop only at a turn without an event: a waker
    // that nudged the device's end would wait for it forever (ctest's timeout is the
    // failure then).
    const int threads_before = thread_count();
    std::weak_ptr<gloo::transport::Device> watched;
    {
        auto device = c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
        watched = device;
        const GlooLoopWaker waker(std::move(device));
        CHECK_FALSE(watched.expired());  // held by the waker alone
        CHECK(thread_count() == threads_before + 1);  // the device's loop
    }
    CHECK(watched.expired());
    CHECK(mpify_test::count_settled_at_most(thread_count, threads_before) == threads_before);
}
