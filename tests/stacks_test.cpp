// Where ranks are when a call gives up on them: each still-running rank's stack in the
// error (a timeout, another rank's failure, an interrupt), and mpify::where() while a
// call runs. The functions wait in frames of their own (functions.cpp), which the
// stacks must name.
#include "functions.hpp"
#include "support.hpp"

#include <mpify/mpify.hpp>

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <string>

using Catch::Matchers::Contains;

namespace {

const mpify::RankFailure* failure_of(const mpify::WorkerError& e, int rank) {
    for (const mpify::RankFailure& f : e.failures())
        if (f.rank == rank) return &f;
    return nullptr;
}

}  // namespace

TEST_CASE("a timed-out rank's stack shows where it waits", "[stacks][timeout]") {
    const std::string how = GENERATE(as<std::string>{}, "spin", "read");
    mpify::Options options = mpify_test::quiet();
    options.timeout = std::chrono::milliseconds(1500);
    options.stop_grace = std::chrono::milliseconds(100);
    try {
        mpify::ranch(options, 3, in_library::wait_in_own_code, how, std::string());
        FAIL("ranch returned");
    } catch (const mpify::TimeoutError& e) {
        const std::string expected = how == "spin" ? "spin_in_own_loop" : "block_in_read";
        for (int rank : {1, 2}) {
            const mpify::RankFailure* failure = failure_of(e, rank);
            REQUIRE(failure != nullptr);
            INFO(failure->stack.describe());
            REQUIRE(failure->stack.unavailable.empty());
            REQUIRE_FALSE(failure->stack.threads.empty());
            // The rank's own thread first, innermost frame first: the user's function,
            // under the read(2) it blocks in.
            CHECK_THAT(failure->stack.summary(), Contains(expected));
            CHECK_THAT(failure->stack.summary(), Contains("wait_in_own_code"));
            CHECK_THAT(failure->stack.summary(), Contains("functions.cpp:"));
            if (how == "read") CHECK_THAT(failure->stack.threads.front().frames.front().function, Contains("read"));
        }
        CHECK_THAT(e.what(), Contains("where it was: in_library::" + expected));
    }
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("when one rank fails, the stacks of the ranks still running are in the error", "[stacks][failure]") {
    mpify_test::TempDir dir;
    const std::string fifo = dir.path() + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    mpify::Options options = mpify_test::quiet();
    options.stop_grace = std::chrono::milliseconds(100);
    try {
        mpify::ranch(options, 3, in_library::wait_in_own_code, std::string("fail"), fifo);
        FAIL("ranch returned");
    } catch (const mpify::WorkerError& e) {
        REQUIRE(e.failures().front().rank == 1);
        CHECK(e.failures().front().stack.threads.empty());  // it threw: nothing to read
        // Rank 2 was stopped by the call: no failure of its own, its stack all the same.
        CHECK(failure_of(e, 2) == nullptr);
        REQUIRE(e.stacks().size() == 1);
        CHECK(e.stacks()[0].rank == 2);
        INFO(e.stacks()[0].describe());
        CHECK_THAT(e.stacks()[0].summary(), Contains("spin_in_own_loop"));
        CHECK_THAT(e.what(),
                   Contains("where the ranks the call stopped were:\n- rank 2: in_library::spin_in_own_loop"));
    }
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("without Options::stacks nothing is read", "[stacks][timeout]") {
    mpify::Options options = mpify_test::quiet();
    options.timeout = std::chrono::milliseconds(1000);
    options.stop_grace = std::chrono::milliseconds(100);
    options.stacks = false;
    try {
        mpify::ranch(options, 2, in_library::wait_in_own_code, std::string("spin"), std::string());
        FAIL("ranch returned");
    } catch (const mpify::TimeoutError& e) {
        const mpify::RankFailure* failure = failure_of(e, 1);
        REQUIRE(failure != nullptr);
        CHECK(failure->stack.threads.empty());
        CHECK(failure->stack.unavailable.empty());
        CHECK_THAT(e.what(), !Contains("where it was"));
    }
}

TEST_CASE("mpify::where() from another thread shows every rank, the caller's own included", "[stacks][where]") {
    CHECK(mpify::where().empty());  // no call runs
    auto call = std::async(std::launch::async,
                           [] { return mpify::ranch(mpify_test::quiet(), 3, in_library::loop_until_interrupted); });
    // Until every rank is in its loop (the workers start in a fraction of a second);
    // where() itself is the probe.
    std::vector<mpify::RankStack> stacks;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    auto everyone_in_their_loop = [&] {
        if (stacks.size() != 3) return false;
        for (const mpify::RankStack& s : stacks)
            if (s.summary().find(s.rank == 0 ? "loop_until_interrupted" : "spin_in_own_loop") == std::string::npos)
                return false;
        return true;
    };
    do {
        stacks = mpify::where();
    } while (!everyone_in_their_loop() && std::chrono::steady_clock::now() < give_up);
    for (const mpify::RankStack& s : stacks) INFO("rank " << s.rank << ": " << s.describe());
    REQUIRE(everyone_in_their_loop());
    CHECK(stacks[0].rank == 0);
    CHECK(stacks[2].rank == 2);
    // The caller's rank is this process's thread that runs ranch: first among its threads.
    const std::vector<mpify::StackFrame>& frames = stacks[0].threads.front().frames;
    CHECK(std::any_of(frames.begin(), frames.end(), [](const mpify::StackFrame& f) {
        return f.function.find("loop_until_interrupted") != std::string::npos;
    }));

    mpify::request_interrupt();  // the interrupt reads where the workers were, then stops them
    try {
        call.get();
        FAIL("ranch returned");
    } catch (const mpify::Interrupted& e) {
        REQUIRE(e.stacks().size() >= 2);
        for (const mpify::RankStack& s : e.stacks())
            if (s.rank != 0) CHECK_THAT(s.summary(), Contains("spin_in_own_loop"));
        CHECK_THAT(e.what(), Contains("where the ranks were:"));
        CHECK_THAT(e.what(), Contains("- rank 1: in_library::spin_in_own_loop() at functions.cpp:"));
    }
    CHECK(mpify::where().empty());
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a summary skips what ships beside LibTorch and CUDA's runtimes to reach the user's frame",
          "[stacks][summary]") {
    // A rank of PyPI's wheel, stopped in a tensor operation's OpenMP team: the wheel's own
    // libgomp sits in torch/lib beside libtorch_cpu.so, CUDA's runtime in nvidia/*/lib.
    const std::string wheel = "/venv/lib/python3.11/site-packages/";
    auto frame = [](std::string function, std::string module, std::string file = {}, int line = 0) {
        mpify::StackFrame f;
        f.function = std::move(function);
        f.module = std::move(module);
        f.file = std::move(file);
        f.line = line;
        return f;
    };
    mpify::ThreadStack thread;
    thread.frames = {frame("gomp_barrier_wait_end", wheel + "torch/lib/libgomp.so.1"),
                     frame("gomp_team_start", wheel + "torch/lib/libgomp.so.1"),
                     frame("GOMP_parallel", wheel + "torch/lib/libgomp.so.1"),
                     frame("cudaStreamSynchronize", wheel + "nvidia/cuda_runtime/lib/libcudart.so.13"),
                     frame("at::native::fill_(at::Tensor&, c10::Scalar const&)", wheel + "torch/lib/libtorch_cpu.so"),
                     frame("train::step(int)", "/home/me/train/libsteps.so", "/home/me/train/steps.cpp", 12),
                     frame("main", "/home/me/train/train", "/home/me/train/main.cpp", 40)};
    mpify::RankStack stack;
    stack.rank = 1;
    stack.threads = {thread};
    CHECK(stack.summary() == "train::step(...) at steps.cpp:12 <- main at main.cpp:40");

    // Only frames of libraries: the innermost ones stand in, so the summary is never empty.
    thread.frames.resize(4);
    stack.threads = {thread};
    CHECK(stack.summary() == "gomp_barrier_wait_end <- gomp_team_start <- GOMP_parallel");
}
