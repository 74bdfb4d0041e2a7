// DdpGuard, in_ddp, the ddp helpers and DistributedDataParallel, on Gloo over loopback.
#include "ddp_functions.hpp"
#include "support.hpp"
#include "tensor_functions.hpp"
#include "thread_count_settling.hpp"

#include <mpify/ddp.hpp>
#include <mpify/distributed_sampler.hpp>

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <torch/cuda.h>
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <numeric>

using Catch::Contains;

namespace {

void check_parameters_match(const std::vector<at::Tensor>& ddp, const std::vector<at::Tensor>& single) {
    REQUIRE(ddp.size() == single.size());
    for (std::size_t i = 0; i < ddp.size(); ++i) {
        INFO("parameter " << i << ": largest difference " << (ddp[i] - single[i]).abs().max().item<double>());
        CHECK(at::allclose(ddp[i], single[i], /*rtol=*/0, /*atol=*/1e-5));
    }
}

}  // namespace

TEST_CASE("all-reduce of each rank's number over n = 2 3 4 gives n(n-1)/2", "[ddp]") {
    for (int n : {2, 3, 4}) {
        INFO("n = " << n);
        CHECK(mpify::in_ddp(n, ddp_test::allreduce_rank) == n * (n - 1) / 2);
    }
}

TEST_CASE("the ranks of a Gloo group load LibTorch only from where mpify was built against it", "[ddp][libtorch]") {
    mpify::DdpOptions gloo;
    gloo.backend = mpify::Backend::gloo;
    CHECK(mpify::in_ddp(gloo, 2, ddp_test::libtorch_files_checked, std::string(MPIFY_TEST_LIBTORCH_DIR)) > 0);
}

TEST_CASE("n ranks with batch B/n train to the same parameters as one process with batch B", "[ddp][model]") {
    ddp_test::TrainSpec spec;
    spec.bucket_bytes = 64;  // several buckets: the bucketed, overlapped path
    const ddp_test::TrainResult result = mpify::in_ddp(3, ddp_test::train_mlp, spec);
    CHECK(result.buckets > 1);
    CHECK(result.sent_during_backward > 0);  // buckets went out while backward was running
    check_parameters_match(result.parameters, ddp_test::train_mlp_single(spec));

    spec.bucket_bytes = 25 << 20;  // one bucket: everything at the end of backward
    check_parameters_match(mpify::in_ddp(3, ddp_test::train_mlp, spec).parameters, ddp_test::train_mlp_single(spec));
}

TEST_CASE("gradient accumulation under no_sync matches one process with the whole batch", "[ddp][model]") {
    ddp_test::TrainSpec spec;
    spec.micro_batches = 2;
    spec.bucket_bytes = 128;
    check_parameters_match(mpify::in_ddp(3, ddp_test::train_mlp, spec).parameters, ddp_test::train_mlp_single(spec));
}

TEST_CASE("the bf16 and fp16 compression hooks halve the bytes all-reduced and train as float32 does", "[ddp][model]") {
    ddp_test::TrainSpec spec;
    spec.bucket_bytes = 64;  // several buckets, each through the hook
    const ddp_test::TrainResult plain = mpify::in_ddp(3, ddp_test::train_mlp, spec);
    const std::vector<at::Tensor> single = ddp_test::train_mlp_single(spec);
    for (const std::string hook : {"bf16", "fp16"}) {
        INFO(hook << " hook");
        spec.hook = hook;
        const ddp_test::TrainResult compressed = mpify::in_ddp(3, ddp_test::train_mlp, spec);
        CHECK(plain.gradient_bytes > 0);
        CHECK(compressed.gradient_bytes * 2 == plain.gradient_bytes);
        CHECK(compressed.sent_during_backward > 0);  // still overlapped with backward
        REQUIRE(compressed.parameters.size() == single.size());
        bool all_exact = true;
        for (std::size_t i = 0; i < single.size(); ++i) {
            const double off = (compressed.parameters[i] - single[i]).abs().max().item<double>();
            INFO("parameter " << i << ": largest difference " << off);
            CHECK(off < 0.05);  // 20 steps of 16-bit gradient sums
            all_exact = all_exact && off < 1e-7;
        }
        CHECK_FALSE(all_exact);  // the sums did travel rounded
    }
}

TEST_CASE("parameters without a gradient on some or all ranks neither hang nor diverge", "[ddp][model]") {
    CHECK(mpify::in_ddp(3, ddp_test::unused_parameters_stay_consistent));
}

TEST_CASE("rank0_first lets rank 0 fill a cache before the others read it", "[ddp]") {
    mpify_test::TempDir dir;
    CHECK(mpify::in_ddp(3, ddp_test::rank0_first_cache, dir.path()) == "all ranks saw rank 0's cache");
}

TEST_CASE("a second DdpGuard inside the first is a usage error", "[ddp][usage]") {
    CHECK_THAT(mpify::in_ddp(2, ddp_test::nested_guard), Contains("another DdpGuard is active in this process"));
}

TEST_CASE("after in_ddp the caller's environment is as it was and a new group works", "[ddp]") {
    for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(name);
    ::setenv("MASTER_PORT", "12345", 1);
    CHECK(mpify::in_ddp(2, ddp_test::allreduce_rank) == 1);
    CHECK(std::getenv("RANK") == nullptr);
    CHECK(std::getenv("WORLD_SIZE") == nullptr);
    CHECK(std::getenv("MASTER_ADDR") == nullptr);
    CHECK(std::string(std::getenv("MASTER_PORT")) == "12345");
    CHECK(mpify::in_ddp(3, ddp_test::allreduce_rank) == 3);
    ::unsetenv("MASTER_PORT");
}

TEST_CASE("the caller's helper threads are named for what they do", "[ddp]") {
    // Rank 0 runs in the caller, beside the group's store and the thread watching the
    // workers: top -H, debuggers and mpify's stacks show their names.
    CHECK(mpify::in_ddp(2, ddp_test::caller_helper_threads) == std::vector<int>{1, 1});
    CHECK(mpify_test::threads_named("mpify-store") == 0);  // both end with the call
    CHECK(mpify_test::threads_named("mpify-watcher") == 0);
}

TEST_CASE("a rank that never joins fails the others with its rank named", "[ddp][failure]") {
    mpify::DdpOptions options;
    options.world_size = 3;  // only 2 ranks are started: rank 2 never comes
    options.timeout = std::chrono::milliseconds(1500);
    try {
        mpify::in_ddp(options, mpify_test::quiet(), 2, ddp_test::noop_in_group);
        FAIL("in_ddp returned");
    } catch (const mpify::Error& e) {
        // Rank 2 never comes; a slow-starting rank 1 (under a sanitizer, say) may be named too.
        // When rank 1 gives up first, the message lists both ranks' reports, on several
        // lines: [\s\S], unlike '.', matches a newline.
        CHECK_THAT(e.what(), Catch::Matches("[\\s\\S]*rank\\(s\\) (1, )?2 did not join the group[\\s\\S]*"));
    }
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a rank that throws mid-training is the error the caller gets", "[ddp][failure]") {
    mpify::DdpOptions options;
    options.timeout = std::chrono::seconds(20);
    try {
        mpify::in_ddp(options, mpify_test::quiet(), 3, ddp_test::fail_mid_training, 1);
        FAIL("in_ddp returned");
    } catch (const mpify::WorkerError& e) {
        REQUIRE_FALSE(e.failures().empty());
        CHECK(e.failures().front().rank == 1);
        CHECK(e.failures().front().message == "diverged at step 3 on rank 1");
    }
    CHECK(mpify_test::has_no_children());
    // The caller's own rank is the cause: its exception comes back as it was thrown.
    CHECK_THROWS_MATCHES(mpify::in_ddp(options, mpify_test::quiet(), 3, ddp_test::fail_mid_training, 0),
                         std::runtime_error, Catch::Message("diverged at step 3 on rank 0"));
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("an explicit port already in use is a clear error before anything starts", "[ddp][failure]") {
    int port = 0;
    const int listener = mpify_test::bind_loopback(port);
    REQUIRE(listener >= 0);
    REQUIRE(::listen(listener, 1) == 0);
    mpify::DdpOptions options;
    options.port = port;
    CHECK_THROWS_WITH(mpify::in_ddp(options, 2, ddp_test::noop_in_group), Contains("Is the port in use?"));
    CHECK(mpify_test::has_no_children());
    ::close(listener);
}

TEST_CASE("a rank computes on the CPU without gpus, and gpus that cannot be had are refused by name", "[ddp][usage]") {
    CHECK(mpify::in_ddp(2, ddp_test::device_of_rank) == "cpu");
    mpify::DdpOptions options;
    options.gpus = {0, -1};
    CHECK_THROWS_WITH(mpify::in_ddp(options, 2, ddp_test::device_of_rank), Contains("mpify::in_ddp: gpus[1] is -1"));
    options.gpus = {0};
    CHECK_THROWS_WITH(mpify::in_ddp(options, 2, ddp_test::device_of_rank),
                      Contains("gpus names 1 GPU for the 2 ranks of this call"));
    CHECK(mpify_test::has_no_children());
    if (torch::cuda::device_count() > 0) return;  // the rest is about a machine without a GPU
    options.gpus = {0, 0};
    CHECK_THROWS_WITH(mpify::in_ddp(options, mpify_test::quiet(), 2, ddp_test::device_of_rank),
                      Contains("mpify::DdpGuard (rank 0): local rank 0 was given GPU 0 (gpus[0]), but this process "
                               "sees 0 GPUs"));
    options.gpus.clear();
    options.backend = mpify::Backend::nccl;
    CHECK_THROWS_WITH(mpify::in_ddp(options, mpify_test::quiet(), 2, ddp_test::device_of_rank),
                      Contains("the NCCL backend"));
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a DdpGuard outside in_ddp without its environment names the missing variables", "[ddp][usage]") {
    for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"}) ::unsetenv(name);
    CHECK_THROWS_WITH(mpify::DdpGuard(), Contains("the environment lacks MASTER_ADDR, MASTER_PORT"));
    CHECK_THROWS_WITH(mpify::ddp::rank(), Contains("no mpify::DdpGuard is active"));
    CHECK_FALSE(mpify::ddp::active());
}

TEST_CASE("a rank, group size or port too large for its type is a usage error naming the variable",
          "[ddp][usage][once]") {
    struct Case {
        const char* rank;
        const char* world_size;
        const char* port;
        const char* named;
    };
    // 2^32, 2^32 + 1, 2^32 + 29500: cut to int they would be rank 0 of 1, port 29500.
    for (const Case& c : {Case{"4294967296", "2", "29500", "RANK='4294967296'"},
                          Case{"0", "4294967297", "29500", "WORLD_SIZE='4294967297'"},
                          Case{"0", "2", "4295002796", "MASTER_PORT='4295002796'"}}) {
        ::setenv("MASTER_ADDR", "127.0.0.1", 1);
        ::setenv("RANK", c.rank, 1);
        ::setenv("WORLD_SIZE", c.world_size, 1);
        ::setenv("MASTER_PORT", c.port, 1);
        CHECK_THROWS_AS(mpify::DdpGuard(), mpify::UsageError);
        CHECK_THROWS_WITH(mpify::DdpGuard(), Contains(c.named) && Contains("is not a whole number from"));
    }
    for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"}) ::unsetenv(name);
}

TEST_CASE("a one-machine group's rendezvous listens on no TCP port unless a port is asked for", "[ddp][security]") {
    // Rank 0 is the caller, which hosts the rendezvous: what it listens on while the
    // group is up. With a port asked for, the store is there, on 127.0.0.1 only (and so is
    // the Gloo group's own port, which the Gloo of LibTorch 2.x keeps open while the group
    // lives) ...
    mpify::DdpOptions with_port;
    with_port.port = mpify_test::free_loopback_port();
    const std::vector<std::string> asked = mpify::in_ddp(with_port, 2, ddp_test::listening_addresses);
    CHECK(!asked.empty());
    for (const std::string& address : asked) CHECK(address == "0100007F");  // 127.0.0.1, as /proc/net/tcp writes it
    // ... and by default it is a UNIX socket, and the group's collectives go through
    // shared memory: no TCP listener at all.
    CHECK(mpify::in_ddp(2, ddp_test::listening_addresses).empty());
}

TEST_CASE("ddp::active tells code inside in_ddp from code outside it", "[ddp]") {
    CHECK_FALSE(mpify::ddp::active());
    CHECK(mpify::in_ddp(2, ddp_test::group_is_active));
    CHECK_FALSE(mpify::ddp::active());
}

TEST_CASE("every rank of a ranch caches tensor memory while its function runs unless told not to, and the "
          "caller's allocator comes back",
          "[memory]") {
    c10::Allocator* before = c10::GetCPUAllocator();
    REQUIRE(before == c10::GetDefaultCPUAllocator());  // no call runs
    CHECK(mpify::ranch(3, in_library::tensor_memory_cached) == std::vector<bool>{true, true, true});
    CHECK(c10::GetCPUAllocator() == before);
    mpify::Options off;
    off.env["MPIFY_TENSOR_MEMORY_CACHE"] = "0";
    CHECK(mpify::ranch(off, 3, in_library::tensor_memory_cached) == std::vector<bool>{false, false, false});
    off.env["MPIFY_TENSOR_MEMORY_CACHE"] = "yes";
    CHECK_THROWS_WITH(mpify::ranch(off, 2, in_library::tensor_memory_cached),
                      Contains("MPIFY_TENSOR_MEMORY_CACHE") && Contains("yes"));
    CHECK(c10::GetCPUAllocator() == before);
}

TEST_CASE("every rank's DdpGuard caches tensor memory unless told not to, and the caller's allocator comes back",
          "[ddp][memory]") {
    c10::Allocator* before = c10::GetCPUAllocator();
    CHECK(mpify::in_ddp(2, ddp_test::ranks_caching_tensor_memory) == 2);
    CHECK(c10::GetCPUAllocator() == before);
    mpify::DdpOptions off;
    off.cache_tensor_memory = false;
    CHECK(mpify::in_ddp(off, 2, ddp_test::ranks_caching_tensor_memory) == 0);
    mpify::Options off_by_environment;
    off_by_environment.env["MPIFY_TENSOR_MEMORY_CACHE"] = "0";
    CHECK(mpify::in_ddp(mpify::DdpOptions{}, off_by_environment, 2, ddp_test::ranks_caching_tensor_memory) == 0);
    CHECK(c10::GetCPUAllocator() == before);
}

TEST_CASE("20 in_ddp calls in a row leak no fds threads or processes", "[ddp][resources][once]") {
    CHECK(mpify::in_ddp(2, ddp_test::noop_in_group) == 2);  // lazy initializations happen here
    const int fds = mpify_test::open_fd_count();
    const int threads = mpify_test::thread_count();
    for (int i = 0; i < 20; ++i) REQUIRE(mpify::in_ddp(2, ddp_test::noop_in_group) == 2);
    CHECK(mpify_test::open_fd_count() == fds);
    // At most: the first call's last thread may still have been leaving when counted.
    CHECK(mpify_test::count_settled_at_most(mpify_test::thread_count, threads) <= threads);
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("with MPIFY_DEBUG every rank says when it reached each round of forming its group", "[ddp][once]") {
    mpify_test::Subprocess caller("/bin/sh",
                                  {"-c", std::string("MPIFY_DEBUG=1 exec ") + MPIFY_TEST_DDP_CALLER + " 2 0 2 0 2>&1"});
    const std::string out = caller.read_all();
    CHECK_THAT(out, Contains("allreduce = 1"));
    CHECK_THAT(out, Contains("mpify debug: rank 0: every rank joined the shared memory made ahead after "));
    CHECK_THAT(out, Contains("[rank 1] mpify debug: rank 1: every rank joined the shared memory made ahead after "));
    // On a machine without NVIDIA's driver (or WSL's GPU device), a CUDA build's ranks
    // skip NCCL without its round.
    if (::access("/proc/driver/nvidia", F_OK) != 0 && ::access("/dev/nvidiactl", F_OK) != 0 &&
        ::access("/dev/nvidia0", F_OK) != 0 && ::access("/dev/dxg", F_OK) != 0)
        CHECK_THAT(out, !Contains("said whether it has a GPU"));
    CHECK(caller.wait() == 0);
    // With a port, a Gloo group: its rounds too.
    const std::string port = std::to_string(mpify_test::free_loopback_port());
    mpify_test::Subprocess gloo_caller("/bin/sh", {"-c", std::string("MPIFY_DEBUG=1 exec ") + MPIFY_TEST_DDP_CALLER +
                                                             " 2 0 2 " + port + " 2>&1"});
    const std::string gloo_out = gloo_caller.read_all();
    CHECK_THAT(gloo_out, Contains("allreduce = 1"));
    // (the round where the ranks join is NCCL's in a CUDA build, where it comes first)
    CHECK_THAT(gloo_out, Contains("mpify debug: rank 0: every rank joined"));
    CHECK_THAT(gloo_out, Contains("mpify debug: rank 0: gloo0: Gloo's connections made after "));
    CHECK_THAT(gloo_out, Contains("[rank 1] mpify debug: rank 1: gloo0: every rank's pairs proven after "));
    CHECK(gloo_caller.wait() == 0);
}

TEST_CASE("two callers at once form two separate groups", "[ddp][resources]") {
    mpify_test::Subprocess first(MPIFY_TEST_DDP_CALLER, {"2", "0", "2", "0"});
    mpify_test::Subprocess second(MPIFY_TEST_DDP_CALLER, {"3", "0", "3", "0"});
    CHECK_THAT(first.read_all(), Contains("allreduce = 1"));   // 0 + 1
    CHECK_THAT(second.read_all(), Contains("allreduce = 3"));  // 0 + 1 + 2
    CHECK(first.wait() == 0);
    CHECK(second.wait() == 0);
}

TEST_CASE("two callers with base ranks 0 and 2 form one group of 4", "[ddp]") {
    const std::string port = std::to_string(mpify_test::free_loopback_port());

    mpify_test::Subprocess machine_a(MPIFY_TEST_DDP_CALLER, {"2", "0", "4", port});
    mpify_test::Subprocess machine_b(MPIFY_TEST_DDP_CALLER, {"2", "2", "4", port});
    CHECK_THAT(machine_a.read_all(), Contains("allreduce = 6"));  // 0 + 1 + 2 + 3
    CHECK_THAT(machine_b.read_all(), Contains("allreduce = 6"));
    CHECK(machine_a.wait() == 0);
    CHECK(machine_b.wait() == 0);
}

TEST_CASE("each rank's shard is disjoint and equal in size and set_epoch reshuffles", "[ddp][sampler]") {
    const std::int64_t size = 103;
    const int world = 4;
    std::vector<std::vector<std::int64_t>> shards;
    for (int rank = 0; rank < world; ++rank) {
        mpify::DistributedSampler sampler(size, rank, world, true, 7);
        sampler.set_epoch(3);
        shards.push_back(sampler.indices());
    }
    std::vector<int> seen(size, 0);
    for (const auto& shard : shards) {
        CHECK(static_cast<std::int64_t>(shard.size()) == 26);  // ceil(103 / 4)
        for (std::int64_t i : shard) ++seen[static_cast<std::size_t>(i)];
    }
    CHECK(std::count(seen.begin(), seen.end(), 0) == 0);                       // every sample is used
    CHECK(std::accumulate(seen.begin(), seen.end(), 0) == 26 * world);          // 1 padding repeat
    CHECK(std::count_if(seen.begin(), seen.end(), [](int c) { return c > 1; }) == 26 * world - size);

    mpify::DistributedSampler sampler(size, 0, world, true, 7);
    sampler.set_epoch(3);
    const auto epoch3 = sampler.indices();
    sampler.set_epoch(4);
    CHECK(sampler.indices() != epoch3);
    sampler.set_epoch(3);
    CHECK(sampler.indices() == epoch3);
}

TEST_CASE("in_ddp with ranks on other machines trains to the same parameters as one process", "[ddp][remote][once]") {
    // The "other machines" are this one through the command launcher "%C" (remote_test.cpp
    // says what that covers); their ranks meet the caller's at a store behind a secret.
    mpify::Options remote;
    remote.placement = mpify::Placement::by_command("%C", {"localhost", "localhost"}, 1);
    ddp_test::TrainSpec spec;
    spec.bucket_bytes = 64;
    const ddp_test::TrainResult result = mpify::in_ddp(mpify::DdpOptions{}, remote, 3, ddp_test::train_mlp, spec);
    CHECK(result.buckets > 1);
    check_parameters_match(result.parameters, ddp_test::train_mlp_single(spec));

    // The group is this call's ranks only: a place among several callers is refused.
    mpify::DdpOptions two_callers;
    two_callers.nodes = 2;
    CHECK_THROWS_WITH(mpify::in_ddp(two_callers, remote, 3, ddp_test::allreduce_rank),
                      Contains("the group is this call's 3 ranks"));
}
