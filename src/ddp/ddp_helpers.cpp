// mpify::ddp: rank queries and the few collectives training code needs by name.
#include "ddp/active_group.hpp"
#include "ddp/collective_wait.hpp"

#include <mpify/ddp.hpp>
#include <mpify/ddp_guard.hpp>
#include <mpify/registry.hpp>

MPIFY_BEGIN_NAMESPACE

// in_ddp runs fn inside a DdpGuard in every rank: workers look the context up by type.
MPIFY_REGISTER_CONTEXT(mpify::DdpGuard);

namespace ddp {

bool active() { return detail::group_is_active(); }

int rank() { return detail::active_group("mpify::ddp::rank").rank; }

int world_size() { return detail::active_group("mpify::ddp::world_size").world_size; }

c10::intrusive_ptr<c10d::ProcessGroup> process_group() {
    return detail::active_group("mpify::ddp::process_group").group;
}

void barrier() {
    detail::wait_for_collective(*detail::active_group("mpify::ddp::barrier").group->barrier(), "mpify::ddp::barrier");
}

void all_reduce(at::Tensor& tensor, c10d::ReduceOp op) {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = op;
    detail::wait_for_collective(*detail::active_group("mpify::ddp::all_reduce").group->allreduce(tensors, options),
                                "mpify::ddp::all_reduce");
}

void broadcast(at::Tensor& tensor, int source) {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = source;
    detail::wait_for_collective(*detail::active_group("mpify::ddp::broadcast").group->broadcast(tensors, options),
                                "mpify::ddp::broadcast");
}

void rank0_first(const std::function<void()>& f) {
    const auto& group = detail::active_group("mpify::ddp::rank0_first");
    if (group.rank == 0) f();
    detail::wait_for_collective(*group.group->barrier(), "mpify::ddp::rank0_first");
    if (group.rank != 0) f();
}

}  // namespace ddp
MPIFY_END_NAMESPACE
