#include "ddp/open_group.hpp"

#include "call/environment.hpp"
#include "ddp/rendezvous.hpp"
#include "ddp/sigpipe_block.hpp"
#include "store/endpoint.hpp"
#include "store/server.hpp"

#include <mpify/error.hpp>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>
#include <fmt/format.h>

namespace mpify::detail {
namespace {

bool is_loopback(const std::string& addr) {
    return addr == "127.0.0.1" || addr == "localhost" || addr == "::1";
}

bool cuda_usable() {
#ifdef USE_C10D_NCCL
    return c10::cuda::device_count() > 0;
#else
    return false;
#endif
}

Backend resolve_backend(const DdpSettings& s) {
    if (s.backend == Backend::nccl && !cuda_usable())
        throw UsageError("mpify::DdpGuard: the NCCL backend needs a LibTorch built with CUDA and NCCL and a GPU; "
                         "this one has none of them usable. Use Backend::gloo (or automatic).");
    if (s.backend == Backend::automatic) return cuda_usable() ? Backend::nccl : Backend::gloo;
    if (!s.gpus.empty() && !cuda_usable())
        throw UsageError("mpify::DdpGuard: gpus were given, but CUDA is not available in this LibTorch or on "
                         "this machine; leave gpus empty to train on the CPU");
    return s.backend;
}

c10::intrusive_ptr<c10d::ProcessGroup> create_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                    const DdpSettings& s, Backend backend) {
#ifdef USE_C10D_NCCL
    if (backend == Backend::nccl) {
        auto options = c10d::ProcessGroupNCCL::Options::create();
        options->timeout = s.timeout;
        return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, s.rank, s.world_size, options);
    }
#else
    (void)backend;
#endif
    auto options = c10d::ProcessGroupGloo::Options::create(s.timeout);
    // Gloo listens, and tells its peers to connect, at the address its device binds.
    // GLOO_SOCKET_IFNAME chooses the interface, as in PyTorch; else a group on one machine
    // stays on loopback, and across machines each rank takes the address of its route to
    // the master, the one its peers can reach (Gloo's own default is the address the
    // host name resolves to, often 127.0.1.1 or 127.0.0.1).
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    if (ifname && *ifname)
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (s.store.rfind("unix:", 0) == 0 || is_loopback(s.addr))
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
        options->devices.push_back(
            c10d::ProcessGroupGloo::createDeviceForHostname(store::local_address_toward(s.addr)));
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, s.rank, s.world_size, options);
}

void bind_device(const DdpSettings& s, Backend backend) {
#ifdef USE_C10D_NCCL
    if (backend != Backend::nccl) return;
    const int device = s.gpus.empty() ? s.local_rank : s.gpus.at(static_cast<std::size_t>(s.local_rank));
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
#else
    (void)s;
    (void)backend;
#endif
}

}  // namespace

std::unique_ptr<ProcessGroupState> open_group(const DdpSettings& s) {
    const Backend backend = resolve_backend(s);
    if (!s.gpus.empty() && s.local_rank >= static_cast<int>(s.gpus.size()))
        throw UsageError(fmt::format("mpify::DdpGuard: local rank {} has no entry in gpus (it has {})", s.local_rank,
                                     s.gpus.size()));
    auto state = std::make_unique<ProcessGroupState>();
    state->sigpipe = std::make_unique<SigpipeBlock>();  // before Gloo starts its threads
    state->rank = s.rank;
    state->world_size = s.world_size;
    std::map<std::string, std::string> variables{
        {"RANK", std::to_string(s.rank)},
        {"WORLD_SIZE", std::to_string(s.world_size)},
        {"MASTER_ADDR", s.addr},
    };
    if (s.port != 0) variables["MASTER_PORT"] = std::to_string(s.port);  // a one-machine group has no port
    state->environment = std::make_unique<ScopedEnvironment>(variables);
    bind_device(s, backend);

    // Launched without in_ddp (torchrun's way), rank 0 hosts the store.
    if (s.store.empty() && s.rank == 0) state->store_server = std::make_unique<store::Server>(store_endpoint(s));
    auto store = connect_store(s);
    state->store = store;
    wait_for_all(*store, s, "joined", "did not join the group");
    state->group = create_group(state->store, s, backend);
    // Gloo's constructor can return on one rank while a peer is still completing its
    // connections: nobody goes on (and perhaps tears the group down) before all are done.
    wait_for_all(*store, s, "connected", "did not finish connecting");
    return state;
}

}  // namespace mpify::detail
