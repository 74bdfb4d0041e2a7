#pragma once
// mpify's own c10d backend for the ranks on one machine: collectives through a shared
// memory segment (shared_segment.hpp) instead of Gloo's TCP connections over loopback.
//
// Why: a Gloo group of two takes milliseconds to form (a listening port and a connection
// per pair, their proofs, three rounds through the store) and to close
// (benchmarks/README.md, "Where in_ddp's time goes"); this one is formed by one round
// through the store and closed without any. Its collectives copy through memory, not
// through the kernel's loopback.
//
// It serves, for dense CPU tensors, one tensor per rank: allreduce (every c10d::ReduceOp
// but PREMUL_SUM), broadcast, allgather, and barrier: what DDP and mpify's helpers use.
// Any other call (send/recv, gather, scatter, reduce_scatter, alltoall, coalesced or
// several tensors per rank...) goes to a Gloo group formed the first time one is made:
// collectives are called in the same order on every rank, so every rank forms it at
// the same call.
//
// Collectives run in call order, each returning a Work whose future completes when it has
// ended. One started by a thread that waits for it at once (a WaitingCaller: mpify's
// helpers, SyncBatchNorm) runs on that thread when nothing else of the group's is under
// way or queued; any other (DDP starts a bucket's all-reduce and goes on with backward)
// runs on a thread of the group's own, started at the first such collective. A group that
// only ever meets its waiting callers has no thread at all: forming and closing it start
// and join none, and a collective costs no hand-over to a thread and back. A rank that
// ends or gives up during a collective fails it on every rank within ~20 ms, and every
// collective after it.
#include "common/clock.hpp"
#include "compat/torch_compat.hpp"
#include "ddp/backends/shared_memory/shared_segment.hpp"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

class SharedMemoryGroup final : public C10dBackend {
public:
    /// Makes the group that serves the calls this one does not (a Gloo group); called once,
    /// on the first such call, by the thread that made it.
    using FormFallback = std::function<c10::intrusive_ptr<C10dBackend>()>;

    /// A group of `segment.world()` ranks, this one `segment.rank()`; each collective may
    /// take `timeout`.
    SharedMemoryGroup(SharedSegment segment, std::chrono::milliseconds timeout, FormFallback form_fallback);
    /// Runs the collectives already called, then ends the group's thread.
    ~SharedMemoryGroup() override;

    const std::string getBackendName() const override { return "mpify-shared-memory"; }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                             const c10d::BroadcastOptions& options) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                             const c10d::AllreduceOptions& options) override;
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs,
                                             const c10d::AllgatherOptions& options) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& options) override;

    // The rest, served by the fallback group.
    c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                       const c10d::AllreduceCoalescedOptions& options) override;
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                          const c10d::ReduceOptions& options) override;
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& options) override;
    c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllgatherOptions& options) override;
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs, const c10d::GatherOptions& options) override;
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const c10d::ScatterOptions& options) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                  const c10d::ReduceScatterOptions& options) override;
    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                        const c10d::ReduceScatterOptions& options) override;
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& output_split_sizes,
                                                 std::vector<int64_t>& input_split_sizes,
                                                 const c10d::AllToAllOptions& options) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                            const c10d::AllToAllOptions& options) override;
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

    /// Gives up on the group (an interrupted wait): the collective under way and every
    /// one after it fail at once, here and on the peers, so destroying it joins its thread
    /// without waiting. A Gloo group it formed is let go, never destroyed (its threads may
    /// be stuck until Gloo's timeout).
    void abandon() noexcept;

private:
    /// Runs `collective` with the deadline it must meet, here when this thread waits for it
    /// and the group is idle, else queued for the group's thread (started if need be), and
    /// returns its Work; `outputs` are the future's value.
    c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                           std::function<void(Clock::time_point)> collective);
    /// Claims the group for a collective run on the calling thread: false when another is
    /// under way or queued (then it must queue behind them).
    bool claim_if_idle();
    /// Ends the claim of the collective that has just run (on either thread).
    void release_claim();
    void run_collectives();
    /// Meets the other ranks at the segment's barrier, asking the waiting caller (when the
    /// collective runs on its thread) whether to go on as it waits.
    void wait_for_peers(Clock::time_point deadline, const std::string& what);
    C10dBackend& fallback();

    void run_allreduce(at::Tensor& tensor, c10d::ReduceOp op, std::uint64_t sequence, Clock::time_point deadline);
    void run_broadcast(at::Tensor& tensor, int root, std::uint64_t sequence, Clock::time_point deadline);
    void run_allgather(std::vector<at::Tensor>& outputs, const at::Tensor& input, std::uint64_t sequence,
                       Clock::time_point deadline);
    /// Meets the other ranks at the barrier. At the `first` meeting of a collective it
    /// also writes this rank's call before, and throws Error on every rank after when
    /// they did not all make the same call.
    ///
    /// A rank may write its own slot before the first meeting: after a collective's last
    /// barrier no rank reads any rank's slot, only the results' slot (the end of an
    /// allreduce), which nobody writes before a meeting.
    void meet(const SegmentCall& call, bool first, std::uint64_t sequence, Clock::time_point deadline,
              const std::string& what);

    SharedSegment segment_;
    std::chrono::milliseconds timeout_;

    FormFallback form_fallback_;  ///< outlives the fallback group: it may own what that one needs
    mutable std::mutex fallback_mutex_;
    c10::intrusive_ptr<C10dBackend> fallback_;  // guarded by fallback_mutex_

    std::mutex queue_mutex_;
    std::condition_variable queue_changed_;
    std::deque<std::function<void()>> queue_;  // guarded by queue_mutex_
    bool stopping_ = false;        // guarded by queue_mutex_
    bool running_ = false;         // a collective is under way (either thread); guarded by queue_mutex_
    std::thread thread_;           // started by the first queued collective; guarded by queue_mutex_
    // Only the thread running a collective (running_ makes it one at a time):
    std::uint64_t next_sequence_ = 0;
    const WaitingCaller* waiting_caller_ = nullptr;  ///< the collective runs on its thread
};

MPIFY_END_DETAIL_NAMESPACE
