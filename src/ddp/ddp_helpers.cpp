// mpify::ddp: rank queries and the few collectives training code needs by name.
#include "ddp/active_group.hpp"
#include "ddp/collective_wait.hpp"
#include "forensics/collective_record.hpp"

#include <mpify/ddp.hpp>
#include <mpify/ddp_guard.hpp>
#include <mpify/registry.hpp>

#include <fmt/format.h>

MPIFY_BEGIN_NAMESPACE

// in_ddp runs fn inside a DdpGuard in every rank: workers look the context up by type.
MPIFY_REGISTER_CONTEXT(mpify::DdpGuard);

namespace ddp {

bool active() { return detail::group_is_active(); }

int rank() { return detail::active_group("mpify::ddp::rank").rank; }

int world_size() { return detail::active_group("mpify::ddp::world_size").world_size; }

c10::Device device() { return detail::active_group("mpify::ddp::device").device; }

c10::intrusive_ptr<c10d::ProcessGroup> process_group() {
    return detail::active_group("mpify::ddp::process_group").group();
}

void barrier() {
    const char* what = "mpify::ddp::barrier";
    const auto& group = detail::active_group(what);
    const std::uint64_t sequence = detail::record_collective("barrier", nullptr, "", what);
    detail::run_collective(what, sequence, [&] { return group.group()->barrier(); });
}

void all_reduce(at::Tensor& tensor, c10d::ReduceOp op) {
    const char* what = "mpify::ddp::all_reduce";
    const auto& group = detail::active_group(what);
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = op;
    const std::uint64_t sequence = detail::record_collective("allreduce", &tensor, detail::reduction_name(op), what);
    detail::run_collective(what, sequence, [&] { return group.group()->allreduce(tensors, options); });
}

c10::intrusive_ptr<c10::ivalue::Future> all_reduce_async(at::Tensor& tensor, const char* site) {
    const auto& group = detail::active_group(site);
    std::vector<at::Tensor> tensors{tensor};
    const std::uint64_t sequence = detail::record_collective("allreduce", &tensor, "SUM", site);
    c10::intrusive_ptr<c10::ivalue::Future> future = group.group()->allreduce(tensors)->getFuture();
    future->addCallback([sequence](c10::ivalue::Future&) { detail::record_call_ended(sequence); });
    return future;
}

void broadcast(at::Tensor& tensor, int source) {
    const char* what = "mpify::ddp::broadcast";
    const auto& group = detail::active_group(what);
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = source;
    const std::uint64_t sequence =
        detail::record_collective("broadcast", &tensor, fmt::format("from rank {}", source), what);
    detail::run_collective(what, sequence, [&] { return group.group()->broadcast(tensors, options); });
}

void rank0_first(const std::function<void()>& f) {
    const char* what = "mpify::ddp::rank0_first";
    const auto& group = detail::active_group(what);
    if (group.rank == 0) f();
    const std::uint64_t sequence = detail::record_collective("barrier", nullptr, "", what);
    detail::run_collective(what, sequence, [&] { return group.group()->barrier(); });
    if (group.rank != 0) f();
}

std::vector<CollectiveCall> recorded_calls() {
    detail::active_group("mpify::ddp::recorded_calls");
    return detail::own_recorded_calls();
}

}  // namespace ddp
MPIFY_END_NAMESPACE
