#include "ddp/open_group.hpp"

#include "common/debug_log.hpp"
#include "common/scoped_environment.hpp"
#include "ddp/gloo_loop_waker.hpp"
#include "ddp/gloo_release.hpp"
#include "ddp/pair_proof.hpp"
#include "ddp/rendezvous.hpp"
#include "ddp/shared_memory_group.hpp"
#include "ddp/sigpipe_block.hpp"
#include "common/endpoint.hpp"
#include "store/server.hpp"

#include <mpify/error.hpp>
#include <mpify/tensor_memory.hpp>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <optional>
#include <unistd.h>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// With MPIFY_DEBUG: "rank R: <what> after N ms" from the start of the group's forming,
// so a slow start shows which round it waited in.
class FormingLog {
public:
    explicit FormingLog(int rank) : rank_(rank) {}
    void reached(const std::string& what) const {
        if (!debug_wanted()) return;
        const auto elapsed = std::chrono::steady_clock::now() - start_;
        debug_line(fmt::format("rank {}: {} after {:.1f} ms", rank_, what,
                               std::chrono::duration<double, std::milli>(elapsed).count()));
    }

private:
    int rank_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

bool is_loopback(const std::string& addr) { return addr == "127.0.0.1" || addr == "localhost" || addr == "::1"; }

bool cuda_usable() {
#ifdef USE_C10D_NCCL
    return c10::cuda::device_count() > 0;
#else
    return false;
#endif
}

// The ranks of one in_ddp call on one machine: they meet at a UNIX socket.
bool ranks_of_one_machine(const DdpSettings& s) { return s.store.rfind("unix:", 0) == 0; }

Backend resolve_backend(const DdpSettings& s) {
    if (s.backend == Backend::nccl && !cuda_usable())
        throw UsageError("mpify::DdpGuard: the NCCL backend needs a LibTorch built with CUDA and NCCL and a GPU; "
                         "this one has none of them usable. Use Backend::gloo (or automatic).");
    if (s.backend == Backend::shared_memory && !ranks_of_one_machine(s))
        throw UsageError("mpify::DdpGuard: Backend::shared_memory serves the ranks of one in_ddp call on one "
                         "machine (with no port given); this group is not one. Use Backend::gloo (or automatic).");
    if (s.backend == Backend::automatic) {
        if (cuda_usable()) return Backend::nccl;
        return ranks_of_one_machine(s) ? Backend::shared_memory : Backend::gloo;
    }
    if (!s.gpus.empty() && !cuda_usable())
        throw UsageError("mpify::DdpGuard: gpus were given, but CUDA is not available in this LibTorch or on "
                         "this machine; leave gpus empty to train on the CPU");
    return s.backend;
}

#ifdef USE_C10D_NCCL
c10::intrusive_ptr<c10d::ProcessGroup> create_nccl_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                         const DdpSettings& s) {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = s.timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, s.rank, s.world_size, options);
}
#endif

// The device a Gloo group of this rank listens on and connects from.
std::shared_ptr<gloo::transport::Device> gloo_device(const DdpSettings& s) {
    // Gloo listens, and tells its peers to connect, at the address its device binds.
    // GLOO_SOCKET_IFNAME chooses the interface, as in PyTorch; else a group on one machine
    // stays on loopback, and across machines each rank takes the address of its route to
    // the master, the one its peers can reach (Gloo's own default is the address the
    // host name resolves to, often 127.0.1.1 or 127.0.0.1).
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    if (ifname && *ifname) return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
    if (s.store.rfind("unix:", 0) == 0 || is_loopback(s.addr))
        return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
    return c10d::ProcessGroupGloo::createDeviceForHostname(local_address_toward(s.addr));
}

// A Gloo group on `device`, its loop nudged while the pairs connect (gloo_loop_waker.hpp).
c10::intrusive_ptr<c10d::ProcessGroup> create_gloo_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                         const DdpSettings& s,
                                                         const std::shared_ptr<gloo::transport::Device>& device,
                                                         const GlooLoopWaker& waker) {
    auto options = c10d::ProcessGroupGloo::Options::create(s.timeout);
    options->devices.push_back(device);
    const GlooLoopWaker::Nudging nudging = waker.nudge();
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, s.rank, s.world_size, options);
}

// How many times a Gloo group is formed anew, on fresh ports, when a connection between
// its ranks fails or brings no proof (pair_proof.hpp), before the guard gives up.
constexpr int gloo_attempts = 3;
// How long connected ranks wait for each other's proofs. The ranks start proving
// together (all finished connecting), and 32 bytes take them milliseconds; the bound is
// what a pair held by a process that sends nothing costs, and a rank held up longer than
// this (a loaded machine) costs one more attempt, not an error.
constexpr std::chrono::milliseconds proof_patience{3000};

// "" when no rank reported trouble, else "rank 1: ...; rank 2: ...".
std::string troubles(const std::vector<std::string>& reports) {
    std::string text;
    for (std::size_t rank = 0; rank < reports.size(); ++rank)
        if (!reports[rank].empty()) text += fmt::format("{}rank {}: {}", text.empty() ? "" : "; ", rank, reports[rank]);
    return text;
}

// A formed Gloo group and the waker of its device's loop (which must outlive it).
struct GlooGroup {
    std::unique_ptr<GlooLoopWaker> waker;
    c10::intrusive_ptr<c10d::ProcessGroup> group;
};

// A Gloo group whose every pair proved to be its two ranks' connection, formed again when
// one did not (each attempt under a prefix of its own, so on new ports). `name` tells
// the store's keys of this group from those of another formed by the same guard.
GlooGroup form_gloo_group(const c10::intrusive_ptr<store::Client>& store, const DdpSettings& s, const FormingLog& log,
                          const std::string& name = "gloo") {
    std::string last;
    for (int attempt = 0; attempt < gloo_attempts; ++attempt) {
        const std::string phase = name + std::to_string(attempt);
        // The attempt's keys: c10d's PrefixStore puts a '/' between this and Gloo's keys.
        const std::string prefix = "mpify/" + phase;
        const std::string proof = publish_proof(*store, prefix, s.rank);
        std::unique_ptr<GlooLoopWaker> waker;  // outlives the group: declared before it
        c10::intrusive_ptr<c10d::ProcessGroup> group;
        std::string trouble;
        log.reached(phase + ": proof published");
        try {
            const std::shared_ptr<gloo::transport::Device> device = gloo_device(s);
            waker = std::make_unique<GlooLoopWaker>(device);
            group = create_gloo_group(c10::make_intrusive<c10d::PrefixStore>(prefix, store), s, device, *waker);
        } catch (const std::exception& e) {
            trouble = "its connections failed: " + first_line_of(e);
            release_waiting_peers(*store, prefix, s);
        }
        log.reached(phase + ": Gloo's connections made");
        last = troubles(gather_reports(*store, s, phase + "/connected", trouble, "did not finish connecting"));
        if (!last.empty()) continue;
        log.reached(phase + ": every rank connected");
        trouble = prove_pairs(*group, *store, prefix, proof, s, std::min(s.timeout, proof_patience));
        log.reached(phase + ": pairs proven");
        last = troubles(gather_reports(*store, s, phase + "/proven", trouble, "did not prove its connections"));
        log.reached(phase + ": every rank's pairs proven");
        if (last.empty()) return GlooGroup{std::move(waker), std::move(group)};
    }
    throw Error(fmt::format(
        "mpify::DdpGuard (rank {} of {}): the group's connections failed {} times; the last time {}. Gloo takes the "
        "first connection that reaches each of its listening ports, so on a machine shared with others this is what "
        "another process connecting to those ports does (the group refuses to run with it); see mpify's "
        "docs/failure-and-security.md.",
        s.rank, s.world_size, gloo_attempts, last));
}

// Slots of the shared-memory group: a collective's tensor goes through in pieces of this size.
constexpr std::size_t shared_memory_slot_bytes = 4u << 20;

// What a rank reports once it has tried to open the group's shared memory: "pid N", or
// "! why not".
std::string shared_memory_report(const std::string& trouble) {
    return trouble.empty() ? "pid " + std::to_string(::getpid()) : "! " + trouble;
}

// mpify's shared-memory group (shared_memory_group.hpp): rank 0 makes the segment and
// says where it is, the others open it, and all report (with their pids) in one round
// of the store, the round where the group's ranks join. Null when some rank could not:
// every rank sees the same reports, so all of them then form a Gloo group instead.
c10::intrusive_ptr<c10d::ProcessGroup> form_shared_memory_group(const c10::intrusive_ptr<store::Client>& store,
                                                                const DdpSettings& s, const FormingLog& log) {
    const std::string where_key = "mpify/shm/segment";
    std::optional<SharedSegment> segment;
    std::string trouble;
    try {
        if (s.rank == 0) {
            segment.emplace(SharedSegment::create(s.world_size, shared_memory_slot_bytes));
            store->set(where_key, store::as_bytes(segment->locator()));
        } else {
            segment.emplace(SharedSegment::open(store::as_string(store->get(where_key)), s.world_size, s.rank));
        }
    } catch (const std::exception& e) {
        trouble = first_line_of(e);
        if (s.rank == 0) store->set(where_key, store::as_bytes("none"));  // the others must not wait for it
    }
    const std::vector<std::string> reports =
        gather_reports(*store, s, "shm/opened", shared_memory_report(trouble), "did not join the group");
    log.reached("every rank joined and opened the shared memory");
    std::vector<pid_t> pids;
    std::string failures;
    for (std::size_t rank = 0; rank < reports.size(); ++rank) {
        if (reports[rank].rfind("pid ", 0) == 0) pids.push_back(static_cast<pid_t>(std::stol(reports[rank].substr(4))));
        else failures += fmt::format("{}rank {}: {}", failures.empty() ? "" : "; ", rank, reports[rank].substr(2));
    }
    if (!failures.empty()) {
        if (debug_wanted()) debug_line("the shared-memory group cannot form (" + failures + "); using Gloo");
        return {};
    }
    segment->close_descriptor();  // every rank has its own mapping now
    segment->watch_peers(pids);
    // Calls the shared memory does not serve go to a Gloo group, formed at the first one.
    auto waker = std::make_shared<std::unique_ptr<GlooLoopWaker>>();
    auto form_fallback = [store, s, waker] {
        GlooGroup gloo = form_gloo_group(store, s, FormingLog(s.rank), "fallback-gloo");
        *waker = std::move(gloo.waker);
        return gloo.group;
    };
    return c10::make_intrusive<SharedMemoryGroup>(std::move(*segment), s.timeout, form_fallback);
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
    bind_device(s, backend);

    // Launched without in_ddp (torchrun's way), rank 0 hosts the store.
    if (s.store.empty() && s.rank == 0) state->store_server = std::make_unique<store::Server>(store_endpoint(s));
    auto store = connect_store(s);
    state->store = store;
    log.reached("store connected");
    if (backend == Backend::shared_memory) {
        // Its one round is also the one where every rank joins (a missing rank is named).
        state->group = form_shared_memory_group(store, s, log);
        if (state->group) return state;
        // A rank could not open the shared memory (told with MPIFY_DEBUG): Gloo it is.
    } else {
        wait_for_all(*store, s, "joined", "did not join the group");
        log.reached("every rank joined");
    }
    if (backend == Backend::gloo || backend == Backend::shared_memory) {
        GlooGroup gloo = form_gloo_group(store, s, log);
        state->gloo_loop_waker = std::move(gloo.waker);
        state->group = std::move(gloo.group);
        return state;
    }
#ifdef USE_C10D_NCCL
    state->group = create_nccl_group(state->store, s);
#endif
    // A constructor can return on one rank while a peer is still completing its
    // connections: nobody goes on (and perhaps tears the group down) before all are done.
    wait_for_all(*store, s, "connected", "did not finish connecting");
    return state;
}

MPIFY_END_DETAIL_NAMESPACE
