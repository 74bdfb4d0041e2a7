#include "ddp/open_group.hpp"

#include "common/scoped_environment.hpp"
#include "ddp/backends/collective_backend.hpp"
#include "ddp/backends/forming_log.hpp"
#include "ddp/rank_device.hpp"
#include "ddp/rendezvous.hpp"
#include "ddp/sigpipe_block.hpp"
#include "store/server.hpp"

#include <mpify/error.hpp>
#include <mpify/tensor_memory.hpp>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Forms the group with `chosen`, or, when its ranks agree it cannot serve them after all,
// with the next available backend that can.
std::unique_ptr<FormedGroup> form_group(const CollectiveBackend& chosen, FormingContext context) {
    if (std::unique_ptr<FormedGroup> formed = chosen.form(context)) return formed;
    for (const CollectiveBackend* next : backends_after(chosen, context.settings))
        if (std::unique_ptr<FormedGroup> formed = next->form(context)) return formed;
    throw Error(fmt::format("mpify::DdpGuard (rank {}): no backend could form the group", context.settings.rank));
}

// Makes `device` this thread's current CUDA device, as c10::cuda::set_device does, through
// the device guard CUDA registers (this file is compiled in builds without CUDA too).
void bind_to_gpu(c10::Device device) { c10::impl::getDeviceGuardImpl(device.type())->setDevice(device); }

}  // namespace

std::unique_ptr<ProcessGroupState> open_group(const DdpSettings& s) {
    const CollectiveBackend& backend = choose_backend(s);
    // The GPU of a rank whose group is not NCCL's: gpus given (checked now, before any
    // waiting), or none. NCCL chooses its own as it forms.
    const DeviceChoice other_backends = device_for_rank(s, s.gpus.empty() ? 0 : visible_gpus(), /*nccl=*/false);
    if (!other_backends.trouble.empty())
        throw UsageError(fmt::format("mpify::DdpGuard (rank {}): {}", s.rank, other_backends.trouble));
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

    // Launched without in_ddp (torchrun's way), rank 0 hosts the store.
    if (s.store.empty() && s.rank == 0) state->store_server = std::make_unique<store::Server>(store_endpoint(s));
    auto store = connect_store(s);
    state->store = store;
    if (s.segment.empty()) log.reached("store connected");  // else at its first use
    state->formed = form_group(backend, FormingContext{store, s, log});
    const int gpu = state->formed->gpu() >= 0 ? state->formed->gpu() : other_backends.gpu;
    if (gpu >= 0) {
        state->device = c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(gpu));
        bind_to_gpu(state->device);
    }
    return state;
}

MPIFY_END_DETAIL_NAMESPACE
