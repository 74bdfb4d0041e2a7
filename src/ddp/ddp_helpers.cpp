// mpify::ddp: rank queries and the few collectives training code needs by name.
#include "ddp/active_group.hpp"

#include <mpify/ddp.hpp>
#include <mpify/ddp_guard.hpp>
#include <mpify/registry.hpp>

namespace mpify {

// in_ddp runs fn inside a DdpGuard in every rank: workers look the context up by type.
MPIFY_REGISTER_CONTEXT(mpify::DdpGuard);

namespace ddp {

bool active() { return detail::group_is_active(); }

int rank() { return detail::active_group("mpify::ddp::rank").rank; }

int world_size() { return detail::active_group("mpify::ddp::world_size").world_size; }

c10::intrusive_ptr<c10d::ProcessGroup> process_group() {
    return detail::active_group("mpify::ddp::process_group").group;
}

void barrier() { detail::active_group("mpify::ddp::barrier").group->barrier()->wait(); }

void all_reduce(at::Tensor& tensor, c10d::ReduceOp op) {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = op;
    detail::active_group("mpify::ddp::all_reduce").group->allreduce(tensors, options)->wait();
}

void broadcast(at::Tensor& tensor, int source) {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = source;
    detail::active_group("mpify::ddp::broadcast").group->broadcast(tensors, options)->wait();
}

void rank0_first(const std::function<void()>& f) {
    const auto& group = detail::active_group("mpify::ddp::rank0_first");
    if (group.rank == 0) f();
    group.group->barrier()->wait();
    if (group.rank != 0) f();
}

}  // namespace ddp
}  // namespace mpify
