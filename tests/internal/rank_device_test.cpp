// Which device each rank computes on (ddp/rank_device.hpp), for any number of GPUs: the
// rule needs no GPU to be checked.
#include "ddp/rank_device.hpp"

#include <mpify/error.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>

using Catch::Contains;
using mpify::detail::DdpSettings;
using mpify::detail::device_for_rank;

namespace {

DdpSettings rank_of(int local_rank, int local_world_size, std::vector<int> gpus = {}) {
    DdpSettings s;
    s.local_rank = local_rank;
    s.rank = local_rank;
    s.local_world_size = local_world_size;
    s.world_size = local_world_size;
    s.gpus = std::move(gpus);
    return s;
}

}  // namespace

TEST_CASE("without gpus a rank computes on the CPU, unless its group is NCCL's", "[rank_device]") {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    CHECK(device_for_rank(rank_of(1, 2), 0, false).gpu == -1);
    CHECK(device_for_rank(rank_of(1, 2), 8, false).gpu == -1);
    CHECK(device_for_rank(rank_of(1, 2), 8, false).trouble.empty());
    // NCCL: local rank k on GPU k.
    CHECK(device_for_rank(rank_of(0, 2), 2, true).gpu == 0);
    CHECK(device_for_rank(rank_of(1, 2), 2, true).gpu == 1);
}

TEST_CASE("NCCL with no GPU or fewer GPUs than ranks says which rank has none and what to do", "[rank_device]") {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    CHECK_THAT(device_for_rank(rank_of(0, 2), 0, true).trouble,
               Contains("local rank 0 has no GPU: this process sees 0 GPUs"));
    const auto third = device_for_rank(rank_of(2, 3), 2, true);
    CHECK(third.gpu == -1);
    CHECK_THAT(third.trouble, Contains("local rank 2 has no GPU of its own: this process sees 2 GPUs for 3 ranks"));
    CHECK_THAT(third.trouble, Contains("run at most 2 ranks per machine with NCCL"));
    // CUDA_VISIBLE_DEVICES is named where it is what hid the GPUs.
    ::setenv("CUDA_VISIBLE_DEVICES", "3", 1);
    CHECK_THAT(device_for_rank(rank_of(1, 2), 1, true).trouble,
               Contains("this process sees 1 GPU (CUDA_VISIBLE_DEVICES is '3') for 2 ranks"));
    ::unsetenv("CUDA_VISIBLE_DEVICES");
}

TEST_CASE("gpus maps local ranks to GPUs in any order, shared except under NCCL", "[rank_device]") {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    CHECK(device_for_rank(rank_of(0, 2, {3, 1}), 4, true).gpu == 3);
    CHECK(device_for_rank(rank_of(1, 2, {3, 1}), 4, false).gpu == 1);
    // Two ranks on one GPU: with Gloo or the shared-memory group, not with NCCL.
    CHECK(device_for_rank(rank_of(1, 2, {0, 0}), 1, false).gpu == 0);
    const auto shared = device_for_rank(rank_of(1, 2, {0, 0}), 1, true);
    CHECK(shared.gpu == -1);
    CHECK_THAT(shared.trouble, Contains("local ranks 0 and 1 were both given GPU 0; NCCL needs a GPU per rank"));
    // A GPU the process does not see.
    const auto missing = device_for_rank(rank_of(0, 1, {5}), 2, false);
    CHECK(missing.gpu == -1);
    CHECK_THAT(missing.trouble,
               Contains("local rank 0 was given GPU 5 (gpus[0]), but this process sees 2 GPUs, 0 to 1"));
    CHECK_THAT(device_for_rank(rank_of(0, 1, {0}), 0, false).trouble, Contains("this process sees 0 GPUs"));
}

TEST_CASE("gpus with a negative number or fewer entries than ranks is refused whatever the machine", "[rank_device]") {
    using mpify::detail::check_gpus;
    CHECK_NOTHROW(check_gpus({}, 4, "mpify::in_ddp"));
    CHECK_NOTHROW(check_gpus({2, 2, 0}, 3, "mpify::in_ddp"));
    CHECK_THROWS_WITH(check_gpus({0, -1}, 2, "mpify::in_ddp"), Contains("mpify::in_ddp: gpus[1] is -1"));
    CHECK_THROWS_WITH(check_gpus({0}, 2, "mpify::DdpGuard"),
                      Contains("mpify::DdpGuard: gpus names 1 GPU for the 2 ranks of this call on this machine"));
}

TEST_CASE("a CUDA tensor arriving in a worker goes to its in_ddp GPU, else to local rank mod the GPUs seen",
          "[rank_device]") {
    using mpify::detail::worker_gpu_for_received_tensors;
    CHECK(worker_gpu_for_received_tensors(2, {}, 0) == 0);
    CHECK(worker_gpu_for_received_tensors(2, {}, 1) == 1);
    CHECK(worker_gpu_for_received_tensors(2, {}, 3) == 1);  // more ranks than GPUs: they share
    CHECK(worker_gpu_for_received_tensors(4, {3, 2}, 0) == 3);
    CHECK(worker_gpu_for_received_tensors(4, {3, 2}, 1) == 2);
    CHECK(worker_gpu_for_received_tensors(2, {3, 2}, 0) == 0);  // a GPU it does not see: the rule without gpus
}
