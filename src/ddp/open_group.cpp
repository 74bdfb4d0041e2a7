#include "ddp/open_group.hpp"

#include "common/scoped_environment.hpp"
#include "ddp/backends/collective_backend.hpp"
#include "ddp/backends/forming_log.hpp"
#include "ddp/rendezvous.hpp"
#include "ddp/sigpipe_block.hpp"
#include "store/server.hpp"

#include <mpify/error.hpp>
#include <mpify/tensor_memory.hpp>

#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Forms the group with `chosen`, or, when its ranks agree it cannot serve them after all,
// with the next available backend that can.
std::unique_ptr<FormedGroup> form_group(const CollectiveBackend& chosen, FormingContext context) {
    if (std::unique_ptr<FormedGroup> formed = chosen.form(context)) return formed;
    context.ranks_joined = true;  // the backend that gave up met every rank
    for (const CollectiveBackend* next : backends_after(chosen, context.settings))
        if (std::unique_ptr<FormedGroup> formed = next->form(context)) return formed;
    throw Error(fmt::format("mpify::DdpGuard (rank {}): no backend could form the group", context.settings.rank));
}

}  // namespace

std::unique_ptr<ProcessGroupState> open_group(const DdpSettings& s) {
    const CollectiveBackend& backend = choose_backend(s);
    if (!s.gpus.empty() && s.local_rank >= static_cast<int>(s.gpus.size()))
        throw UsageError(fmt::format("mpify::DdpGuard: local rank {} has no entry in gpus (it has {})", s.local_rank,
                                     s.gpus.size()));
    const FormingLog log(s.rank);
    auto state = std::make_unique<ProcessGroupState>();
    state->sigpipe = std::make_unique<SigpipeBlock>();  // before Gloo starts its threads
    if (s.cache_tensor_memory) state->tensor_memory = std::make_unique<TensorMemoryCache>();
    state->rank = s.rank;
    state->world_size = s.world_size;
    std::map<std::string, std::string> variables{
        {"RANK", std::to_string(s.rank)},
        {"WORLD_SIZE", std::to_string(s.world_size)},
        {"MASTER_ADDR", s.addr},
    };
    if (s.port != 0) variables["MASTER_PORT"] = std::to_string(s.port);  // a one-machine group has no port
    state->environment = std::make_unique<ScopedEnvironment>(variables);
    backend.prepare(s);

    // Launched without in_ddp (torchrun's way), rank 0 hosts the store.
    if (s.store.empty() && s.rank == 0) state->store_server = std::make_unique<store::Server>(store_endpoint(s));
    auto store = connect_store(s);
    state->store = store;
    log.reached("store connected");
    state->formed = form_group(backend, FormingContext{store, s, log});
    return state;
}

MPIFY_END_DETAIL_NAMESPACE
