// DdpGuard and DdpLaunch: creating and destroying one c10d process group per scope.
#include "active_group.hpp"
#include "ddp_settings.hpp"
#include "rendezvous.hpp"

#include "../environment.hpp"

#include <mpify/error.hpp>
#include <mpify/registry.hpp>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <fmt/format.h>
#include <mutex>

namespace mpify {
namespace detail {
namespace {

std::mutex active_mutex;
DdpGuard::State* active = nullptr;

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
    // Loopback groups bind to loopback; across machines, Gloo picks this host's address
    // (GLOO_SOCKET_IFNAME chooses the interface, as in PyTorch).
    if (is_loopback(s.addr))
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"))
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else
        options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
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

std::unique_ptr<DdpGuard::State> open_group(const DdpSettings& s) {
    const Backend backend = resolve_backend(s);
    if (!s.gpus.empty() && s.local_rank >= static_cast<int>(s.gpus.size()))
        throw UsageError(fmt::format("mpify::DdpGuard: local rank {} has no entry in gpus (it has {})", s.local_rank,
                                     s.gpus.size()));
    auto state = std::make_unique<DdpGuard::State>();
    state->rank = s.rank;
    state->world_size = s.world_size;
    state->environment = std::make_unique<ScopedEnvironment>(std::map<std::string, std::string>{
        {"RANK", std::to_string(s.rank)},
        {"WORLD_SIZE", std::to_string(s.world_size)},
        {"MASTER_ADDR", s.addr},
        {"MASTER_PORT", std::to_string(s.port)},
    });
    bind_device(s, backend);

    state->store = connect_store(s, !s.store_hosted && s.rank == 0);
    wait_for_all(*state->store, s, "joined", "did not join the group");
    state->group = create_group(state->store, s, backend);
    // Gloo's constructor can return on one rank while a peer is still completing its
    // connections: nobody goes on (and perhaps tears the group down) before all are done.
    wait_for_all(*state->store, s, "connected", "did not finish connecting");
    return state;
}

// Claimed before a guard opens its group, so a second guard fails before joining anything.
bool claimed = false;

}  // namespace

bool group_is_active() {
    std::lock_guard lock(active_mutex);
    return active != nullptr;
}

const DdpGuard::State& active_group(const char* caller) {
    std::lock_guard lock(active_mutex);
    if (active == nullptr)
        throw UsageError(fmt::format("{}: no mpify::DdpGuard is active in this process; call it inside a function "
                                     "run by mpify::in_ddp, or inside a DdpGuard scope", caller));
    return *active;
}

DdpLaunch::DdpLaunch(const DdpOptions& options, int n) {
    const int world = options.world_size.value_or(n);
    if (n < 1) throw UsageError(fmt::format("mpify::in_ddp: n must be at least 1 (it is {})", n));
    if (options.base_rank < 0 || options.base_rank + n > world)
        throw UsageError(fmt::format("mpify::in_ddp: ranks {}..{} of this call do not fit in a group of {} "
                                     "(base_rank {}, n {}, world_size {})", options.base_rank,
                                     options.base_rank + n - 1, world, options.base_rank, n, world));
    if (options.port < 0 || options.port > 65535)
        throw UsageError(fmt::format("mpify::in_ddp: port {} is not a TCP port", options.port));
    int port = options.port;
    if (options.base_rank == 0) {
        // This caller hosts the rendezvous: with port 0 the kernel picks a free port as
        // the store binds it, so no other process can take it in between.
        c10d::TCPStoreOptions store_options;
        store_options.port = static_cast<std::uint16_t>(port);
        store_options.isServer = true;
        store_options.waitWorkers = false;
        store_options.timeout = options.timeout;
        auto fail = [&](const std::string& reason) {
            return UsageError(fmt::format("mpify::in_ddp: cannot open the rendezvous store on {}:{} ({}). {}",
                                          options.addr, options.port, reason,
                                          options.port != 0 ? "Is the port in use? Choose another, or 0 for a free one."
                                                            : ""));
        };
        try {
            auto store = c10::make_intrusive<c10d::TCPStore>(options.addr, store_options);
            port = store->getPort();
            store_ = std::make_shared<c10::intrusive_ptr<c10d::TCPStore>>(std::move(store));
        } catch (const c10::Error& e) {
            throw fail(e.what_without_backtrace());
        } catch (const std::exception& e) {  // c10d's SocketError, among others
            throw fail(e.what());
        }
    } else if (port == 0) {
        throw UsageError("mpify::in_ddp: a caller with base_rank > 0 joins the group of the caller with "
                         "base_rank 0; give it that caller's addr and port (port 0 cannot be agreed on)");
    }
    environment_ = environment_for(options, world, port);
}

DdpLaunch::~DdpLaunch() = default;

}  // namespace detail

DdpGuard::State::~State() {
    group.reset();  // joins Gloo's threads before the store they talk through goes
    store.reset();
}

DdpGuard::DdpGuard() { open(detail::settings_from_environment()); }

DdpGuard::DdpGuard(const DdpOptions& options) { open(detail::settings_from_options(options)); }

void DdpGuard::open(const detail::DdpSettings& settings) {
    {
        std::lock_guard lock(detail::active_mutex);
        if (detail::claimed)
            throw UsageError("mpify::DdpGuard: another DdpGuard is active in this process; guards cannot be "
                             "nested or used from two threads at once. Let the first one end first.");
        detail::claimed = true;
    }
    try {
        state_ = detail::open_group(settings);
    } catch (...) {
        std::lock_guard lock(detail::active_mutex);
        detail::claimed = false;
        throw;
    }
    std::lock_guard lock(detail::active_mutex);
    detail::active = state_.get();
}

DdpGuard::~DdpGuard() {
    {
        std::lock_guard lock(detail::active_mutex);
        detail::active = nullptr;
    }
    state_.reset();  // the group, then the store, then the environment as it was
    std::lock_guard lock(detail::active_mutex);
    detail::claimed = false;
}

int DdpGuard::rank() const { return state_->rank; }
int DdpGuard::world_size() const { return state_->world_size; }

}  // namespace mpify
