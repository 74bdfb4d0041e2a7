#pragma once
// The launchers' seam: how a call starts ranks on other machines through a launcher the
// user has (Options::placement), and how a process that a launcher started learns its
// place among the machines (DdpOptions::from_environment). The generic call path knows
// launchers only through this header. Each launcher keeps both halves in one file:
// command.cpp (a command template, which every other launcher resolves to), mpirun.cpp,
// slurm.cpp, torchrun.cpp (a place only: mpify starts no ranks through torchrun).
#include <mpify/abi.hpp>
#include <mpify/export.hpp>
#include <mpify/placement.hpp>

#include <optional>
#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

// resolve_placement (<mpify/placement.hpp>: in_ddp's template calls it) turns a
// placement into a command template and its hosts, as its launcher says.

/// After a call with `placement` failed: what its launcher learnt of the machines at
/// earlier calls (a Slurm job's nodes and their addresses) is asked again at the next
/// call, since it may have changed (the job may have ended).
void forget_launcher_answers(const Placement& placement) noexcept;

/// A rank of a call that runs on another machine, and that machine.
struct PlacedRank {
    int rank = 0;
    std::string host;
};

/// Where the ranks of a call of `n` ranks run with the resolved `placement`: every rank
/// but `caller_rank` (which runs on this machine), on the hosts in order, ranks_per_host
/// on each. Throws UsageError for a template without %C, ranks_per_host below 1 or too
/// few hosts.
std::vector<PlacedRank> placed_ranks(const Placement& placement, int n, std::optional<int> caller_rank);

/// The resolved placement's template with %H = `host` (shell-quoted), %C = `command` and
/// %% = %. Throws UsageError for any other %.
std::string launch_command(const Placement& placement, const std::string& host, const std::string& command);

/// A process's place in a group across machines, as its launcher's variables say.
struct LaunchedPlace {
    int node_rank = 0;
    int nodes = 1;
    std::optional<std::string> addr;  ///< where node 0's store is, when the variables say
    int port = 0;                     ///< the store's port
};

/// The place that the variables of the launcher that started this process say (torchrun's
/// names, Open MPI's mpirun, Slurm's srun, in that order); nullopt when none is set.
/// Throws UsageError naming the variable, its launcher and what to set.
MPIFY_API std::optional<LaunchedPlace> launched_place();

MPIFY_END_DETAIL_NAMESPACE
