#pragma once
// Helpers for code running inside a DdpGuard (every rank of an in_ddp call).
#include <mpify/abi.hpp>
#include <mpify/detail/libtorch_generation.hpp>
#include <mpify/export.hpp>
#include <mpify/stack.hpp>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <functional>
#include <vector>

MPIFY_BEGIN_NAMESPACE
namespace ddp {

/// Whether a DdpGuard is active in this process (code that runs both alone and inside
/// in_ddp asks this before using the functions below).
MPIFY_API bool active();
/// Global rank of this process in the active group. Throws mpify::UsageError when no
/// DdpGuard is active (as do all the functions below).
MPIFY_API int rank();
/// Number of processes in the active group.
MPIFY_API int world_size();
/// The device this rank computes on: its GPU when the group is NCCL's (local rank k:
/// DdpOptions::gpus[k], or GPU k) or when DdpOptions::gpus was given, else the CPU. The
/// guard made it the current CUDA device already; put the model and the batches on it.
/// GPU numbers count among the GPUs CUDA_VISIBLE_DEVICES leaves visible.
MPIFY_API c10::Device device();
/// The active c10d process group, for collectives these helpers do not cover.
MPIFY_API c10::intrusive_ptr<c10d::ProcessGroup> process_group();
/// Waits until every rank has reached the barrier.
MPIFY_API void barrier();
/// Reduces `tensor` in place over all ranks (default: sum).
MPIFY_API void all_reduce(at::Tensor& tensor, c10d::ReduceOp op = c10d::ReduceOp::SUM);
/// Starts a SUM all-reduce of `tensor` in place and returns at once: the future ends when
/// the sum is in `tensor` (its value: a list holding `tensor`). Entered in the record of
/// collective calls as made by `site`. For communication hooks; code that can wait calls
/// all_reduce, which also stops at an interrupt.
MPIFY_API c10::intrusive_ptr<c10::ivalue::Future> all_reduce_async(at::Tensor& tensor,
                                                                   const char* site = "mpify::ddp::all_reduce_async");
/// Copies rank `source`'s `tensor` into every rank's `tensor`.
MPIFY_API void broadcast(at::Tensor& tensor, int source = 0);
/// Rank 0 runs `f` first; the others run it after rank 0 has finished (downloads,
/// unpacking, caches: rank 0 fills the cache, the others find it full). Every rank runs f.
MPIFY_API void rank0_first(const std::function<void()>& f);
/// This rank's last collective calls in the active group that mpify made (its helpers,
/// DistributedDataParallel, SyncBatchNorm), oldest first, as a hang report shows them: the
/// last one's `sequence` counts every call since the group formed. Empty when the record
/// is off (MPIFY_COLLECTIVE_RECORD=0).
MPIFY_API std::vector<CollectiveCall> recorded_calls();

}  // namespace ddp
MPIFY_END_NAMESPACE
