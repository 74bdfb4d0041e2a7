#pragma once
// DdpGuard: the RAII scope of one c10d process group; in_ddp: ranch with a DdpGuard
// around fn in every rank, returning rank 0's result.
//
//   double train(Config cfg) {
//       mpify::DdpGuard ddp;    // in a rank started by in_ddp: joins the group
//       ...
//   }
//   MPIFY_REGISTER(train);
//   double accuracy = mpify::in_ddp(4, train, cfg);
#include <mpify/abi.hpp>
#include <mpify/detail/restarts.hpp>
#include <mpify/export.hpp>
#include <mpify/ranch.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

MPIFY_BEGIN_NAMESPACE

/// Which c10d backend a group uses.
enum class Backend {
    /// NCCL when this LibTorch has CUDA and NCCL and every rank of the group has a GPU of
    /// its own (the ranks agree on it as the group forms); else shared_memory for the
    /// ranks of one in_ddp call on one machine, and Gloo for any other group.
    automatic,
    /// CPU tensors over TCP (Gloo), also between the ranks of one machine; CUDA tensors
    /// too, copied through the host (all-reduce and broadcast)
    gloo,
    /// CUDA tensors over NCCL, a GPU per rank (needs a CUDA build of LibTorch); CPU tensors
    /// go to a Gloo group of the same ranks
    nccl,
    /// CPU tensors through memory the ranks share: mpify's own backend, for the ranks of
    /// one in_ddp call on one machine. allreduce, broadcast, allgather and barrier go
    /// through it; any other call goes to a Gloo group formed when one is first made.
    shared_memory,
};

/// How the ranks of one group find each other.
///
/// On one machine the defaults do: the group's rendezvous is a UNIX socket of a random
/// name in Linux's abstract namespace (nothing on disk, no port). Across machines, each machine runs in_ddp with the same n and its own place:
/// node_rank and nodes (or base_rank and world_size), the master's addr and a port;
/// DdpOptions::from_environment() reads them from what Slurm, Open MPI or a torchrun-style
/// scheduler set.
struct DdpOptions {
    /// Ranks in the whole group; default: the ranks of this ranch call (LOCAL_WORLD_SIZE),
    /// or nodes × n. Give it with base_rank, or give node_rank and nodes instead.
    std::optional<int> world_size;
    /// Global rank of this call's local rank 0 (RANK = base_rank + LOCAL_RANK).
    int base_rank = 0;
    /// This machine's index among `nodes` machines that each run in_ddp with the same n
    /// (torchrun's NODE_RANK / GROUP_RANK): base_rank = node_rank × n.
    int node_rank = 0;
    /// How many machines run in_ddp for this group (torchrun's NNODES): world_size = nodes × n.
    int nodes = 1;
    /// Address of the machine with base_rank 0, where the rendezvous store listens (on this
    /// address only). Each rank's Gloo device takes this machine's address on the route to
    /// it, unless GLOO_SOCKET_IFNAME names an interface.
    std::string addr = "127.0.0.1";
    /// Port of the rendezvous store across machines. 0: on one machine, no port at all (a
    /// UNIX socket); across machines, a free port chosen by the caller with base_rank 0
    /// (callers with base_rank > 0 must then be given it). A port given on one machine is
    /// used, on `addr`.
    int port = 0;
    /// The c10d backend.
    Backend backend = Backend::automatic;
    /// Local rank -> GPU, any GPUs in any order ({3, 1}: local rank 0 uses GPU 3), one
    /// entry per rank of the call on this machine. Given, every rank computes on its GPU
    /// whatever the backend (ranks may share one, except with NCCL); empty, local rank k
    /// uses GPU k with NCCL and the CPU otherwise. Numbers count among the GPUs that
    /// CUDA_VISIBLE_DEVICES leaves visible. mpify::ddp::device() tells a rank its device.
    std::vector<int> gpus;
    /// How long joining the group, and each collective, may take before failing.
    std::chrono::milliseconds timeout{std::chrono::minutes(5)};
    /// Whether every rank's DdpGuard holds a mpify::TensorMemoryCache, so that a training
    /// step reuses the tensor memory of the step before instead of faulting it in afresh
    /// (the caller's rank trained much slower without). Also off when the environment has
    /// MPIFY_TENSOR_MEMORY_CACHE=0.
    bool cache_tensor_memory = true;

    /// This machine's place in a group across machines, from the launcher that started
    /// this program once per machine (first found wins):
    /// - torchrun's names: NODE_RANK (or GROUP_RANK) and NNODES, MASTER_ADDR, MASTER_PORT;
    /// - Open MPI's mpirun: OMPI_COMM_WORLD_RANK and _SIZE, with MASTER_ADDR given
    ///   (`mpirun -x MASTER_ADDR=host-of-rank-0`);
    /// - Slurm's srun, one task per node: SLURM_NODEID and SLURM_NNODES (a job step:
    ///   SLURM_STEP_ID; an sbatch script itself is refused, it runs on one node); the
    ///   master is MASTER_ADDR or else the first host of SLURM_STEP_NODELIST (or
    ///   SLURM_JOB_NODELIST).
    /// The port is MASTER_PORT, else 29500 (under Slurm: 20000 + SLURM_JOB_ID mod 20000,
    /// so that two jobs sharing a node do not collide). With none of these variables: one
    /// machine (the defaults). Missing or contradictory variables throw UsageError naming them.
    MPIFY_API static DdpOptions from_environment();
};

/// The RAII scope of one process group. On construction: sets RANK, WORLD_SIZE,
/// MASTER_ADDR and MASTER_PORT (not for a one-machine in_ddp group, whose rendezvous is
/// a UNIX socket and has no port), binds the process to its GPU when CUDA is used, joins
/// the rendezvous and creates the group. On destruction: destroys the group and restores
/// the environment; a new guard in the same process then works. One guard at a time
/// per process: a second one, nested or on another thread, is a mpify::UsageError.
///
/// Default-constructed (as in_ddp does in every rank), it reads its settings from the
/// environment in_ddp prepared; outside in_ddp it needs MASTER_ADDR and MASTER_PORT and
/// RANK/WORLD_SIZE (or LOCAL_RANK/LOCAL_WORLD_SIZE), as torchrun provides, and rank 0
/// hosts the rendezvous at MASTER_ADDR:MASTER_PORT.
class MPIFY_API DdpGuard {
public:
    /// Joins the group with the settings in_ddp (or a launcher) put in the environment.
    DdpGuard();
    /// With explicit settings (the rank is base_rank + LOCAL_RANK).
    explicit DdpGuard(const DdpOptions& options);
    /// Destroys the group and restores the environment variables the guard set.
    ~DdpGuard();
    DdpGuard(const DdpGuard&) = delete;
    DdpGuard& operator=(const DdpGuard&) = delete;

    /// Global rank of this process in the group.
    int rank() const { return rank_; }
    /// Number of processes in the group.
    int world_size() const { return world_size_; }

private:
    // The group itself is the process's active group, kept in the library: one guard
    // at a time per process.
    int rank_ = 0;
    int world_size_ = 1;
};

namespace detail {

/// What in_ddp does in the caller around its ranch: validates the options, opens the
/// rendezvous store when this caller has base_rank 0 (with port 0: a UNIX socket in the
/// abstract namespace on one machine, a free port across machines; for ranks on other machines, on the address they reach the caller at, behind a fresh
/// secret), and calls `run` with the environment that tells every rank's DdpGuard where
/// to go. The store stays open until `run` returns.
/// `restarts` (Options::restarts) is refused for a group whose other machines run callers
/// of their own: they would restart apart.
MPIFY_API void with_rendezvous(const DdpOptions& options, const Placement& placement, int n, int restarts,
                               const std::function<void(const std::map<std::string, std::string>&)>& run);

}  // namespace detail

/// Runs fn on n local ranks inside a DdpGuard each and returns rank 0's result (the
/// caller is rank 0), like Python mpify's in_torchddp. `ranch_options` apply as for
/// ranch, except that the caller is always rank 0 and only its result is kept.
///
/// With `ranch_options.placement` on other machines, ranks 1..n-1 run there and the group
/// is this call's n ranks: the rendezvous store listens on the caller's address toward
/// them (Placement::caller_address) at `options.port` (0: a free one) and serves only
/// connections that prove a fresh secret; leave addr, nodes, node_rank, base_rank and
/// world_size at their defaults. Gloo's own connections are not authenticated and its
/// tensors travel in clear.
///
/// With Options::restarts, every attempt forms a fresh group; with Options::min_ranks
/// as well, an attempt after the loss of a machine forms it on the machines that answer,
/// with fewer ranks (fn sees the size in ddp::world_size(); a DistributedSampler shards
/// for it).
template <class R, class... P, class... A>
std::decay_t<R> in_ddp(const DdpOptions& options, const Options& ranch_options, int n, R (*fn)(P...), A&&... args) {
    using Result = std::decay_t<R>;
    Options group = ranch_options;
    group.caller_rank = 0;
    group.gather = false;
    group.placement = detail::resolve_placement(group.placement, n - 1);  // asked of Slurm once
    constexpr bool reusable = std::is_invocable_v<R (*)(P...), std::remove_reference_t<A>&...>;
    std::optional<std::conditional_t<std::is_void_v<Result>, char, Result>> result;  // rank 0's
    // One attempt: a fresh rendezvous and group of the attempt's ranks (fewer after a
    // machine was lost, with Options::min_ranks); the ranch inside it does not restart.
    auto attempt = [&](const Options& attempt_options, int ranks, bool last_attempt) {
        detail::with_rendezvous(
            options, attempt_options.placement, ranks, ranch_options.restarts,
            [&](const std::map<std::string, std::string>& environment) {
                Options o = attempt_options;
                for (const auto& [name, value] : environment) o.env[name] = value;
                auto run = [&](auto&&... call_args) {
                    if constexpr (std::is_void_v<Result>)
                        ranch<DdpGuard>(o, ranks, fn, std::forward<decltype(call_args)>(call_args)...);
                    else
                        result.emplace(std::move(
                            ranch<DdpGuard>(o, ranks, fn, std::forward<decltype(call_args)>(call_args)...).front()));
                };
                if constexpr (reusable) {
                    if (!last_attempt) return run(args...);  // a restart may follow: keep them whole
                }
                run(std::forward<A>(args)...);
            });
    };
    detail::run_with_restarts(group, reinterpret_cast<const void*>(fn), "mpify::in_ddp", n, reusable, attempt);
    if constexpr (!std::is_void_v<Result>) return std::move(*result);
}

/// in_ddp with default ranch options.
template <class R, class... P, class... A>
std::decay_t<R> in_ddp(const DdpOptions& options, int n, R (*fn)(P...), A&&... args) {
    return in_ddp(options, Options{}, n, fn, std::forward<A>(args)...);
}

/// in_ddp with default options: a group of n local ranks, mpify's shared-memory group on
/// the CPU (NCCL with GPUs), meeting at a private UNIX socket: no port at all.
template <class R, class... P, class... A>
std::decay_t<R> in_ddp(int n, R (*fn)(P...), A&&... args) {
    return in_ddp(DdpOptions{}, Options{}, n, fn, std::forward<A>(args)...);
}

MPIFY_END_NAMESPACE
