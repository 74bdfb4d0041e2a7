#pragma once
// mpify::Placement: where the ranks of a call run — this machine, or other machines
// reached through a launcher the user already has.
#include <mpify/abi.hpp>
#include <mpify/export.hpp>

#include <chrono>
#include <string>
#include <vector>

MPIFY_BEGIN_NAMESPACE

/// Where a call's ranks run (Options::placement). The default is this machine.
///
/// With a launcher, the caller's own rank (Options::caller_rank) stays on this machine
/// and every other rank runs on the hosts, `ranks_per_host` on each in turn: with
/// caller_rank 0 and 2 per host, ranks 1 and 2 on the first host, 3 and 4 on the second.
/// On each host the launcher starts mpify-worker once, as the host's node template (see
/// template_idle), which forks an agent for each remote rank of each call (or, with
/// template_idle 0, the launcher starts each rank's agent itself): the agent
/// connects back to one TCP port of the caller, proves that it belongs to this call
/// (a fresh 256-bit secret per call, which never appears on a command line), starts the
/// rank's worker there and relays its channel, its output ("[rank 3@node2] ...") and how
/// it ended. A rank, host or network that fails stops every rank, as on one machine;
/// an agent whose caller is gone or silent for 3 s stops its worker.
///
/// On every host, mpify (mpify-worker at `worker_program`) and LibTorch must be
/// installed. The function must be in a shared library (functions of the program itself
/// are refused: put them in a library, e.g. with load_source); a host that lacks that
/// library's bytes at its path receives them from the caller into its cache
/// ($MPIFY_CACHE_DIR/shipped, by SHA-256), once per version.
struct Placement {
    /// How the remote ranks' agents are started.
    enum class Launcher {
        /// Workers are started here, as Options::spawner says.
        this_machine,
        /// `command` is run here by /bin/sh once per remote rank, with %H replaced by the
        /// rank's host and %C by the command that starts its agent there (shell-quoted).
        /// The call's secret is the first line of the command's stdin: the command must
        /// pass its stdin on (ssh does; so do `ip netns exec`, `docker exec -i`, `srun -n1`).
        command,
        /// Slurm's srun starts each remote rank's agent as a step of an allocation: the
        /// caller's own (SLURM_JOB_ID) or `slurm_job`, on its nodes in order (`hosts`,
        /// when given, instead), with `srun --jobid=J --overlap --nodes=1 --ntasks=1
        /// --nodelist=NODE`. A named job's nodes are asked of Slurm (squeue) at its first
        /// call and remembered until a call fails. Nothing is submitted, polled or
        /// cancelled: the allocation is the user's. Outside an allocation a call is a
        /// UsageError with the salloc line to run.
        slurm,
        /// Open MPI's mpirun starts each remote rank's agent on its host: `mpirun
        /// --host HOST -np 1` (plus `launcher_options`), on `hosts` in blocks. mpirun
        /// passes its stdin (the secret) on to its one process.
        mpirun,
    };
    /// Which launcher starts them; by_command, mpirun and slurm set it.
    Launcher launcher = Launcher::this_machine;

    /// The machines the remote ranks run on, in order.
    std::vector<std::string> hosts;
    /// How many ranks each host takes, in blocks.
    int ranks_per_host = 1;
    /// For Launcher::command: the command template (%H host, %C agent's command, %% a %).
    std::string command;
    /// For Launcher::slurm: the allocation's job id; empty: SLURM_JOB_ID.
    std::string slurm_job;
    /// For Launcher::slurm and mpirun: more options for srun or mpirun, as shell words
    /// (e.g. "--gpus-per-task=1", "--mca btl_tcp_if_include eth0").
    std::string launcher_options;
    /// The address of this machine that the agents connect back to; empty: this machine's
    /// address on the route to the first host. A wildcard (0.0.0.0, ::) is refused.
    std::string caller_address;
    /// The port the agents connect back to; 0: a free port chosen for each call.
    int port = 0;
    /// Where mpify-worker is on the hosts; empty: the same path as on this machine.
    std::string worker_program;
    /// How long the agents have to connect back once the launchers started (the call's
    /// timeout, when shorter, wins).
    std::chrono::milliseconds start_timeout{60'000};
    /// How long each host's *node template* stays once idle. On the first call that
    /// places ranks on a host, the launcher starts one mpify-worker there as its node
    /// template (one launcher per host instead of one per rank and call); it loads the
    /// function's library (and so LibTorch) once, and forks each call's rank agents and
    /// workers, so later calls start their remote ranks in milliseconds. It ends when this
    /// process ends, after this long without a call's ranks, or with
    /// mpify::stop_node_templates(); under Slurm, as a step, with the allocation.
    /// 0 s: no node templates; each rank is started by a launcher of its own, every call.
    /// MPIFY_SPAWNER=exec also turns them off.
    std::chrono::seconds template_idle{600};

    /// Ranks started by running `command` (see Launcher::command) for each, on `hosts`.
    static Placement by_command(std::string command, std::vector<std::string> hosts, int ranks_per_host = 1) {
        Placement placement;
        placement.launcher = Launcher::command;
        placement.command = std::move(command);
        placement.hosts = std::move(hosts);
        placement.ranks_per_host = ranks_per_host;
        return placement;
    }

    /// Ranks started by Open MPI's mpirun (see Launcher::mpirun) on `hosts`,
    /// `ranks_per_host` on each in turn.
    static Placement mpirun(std::vector<std::string> hosts, int ranks_per_host = 1) {
        Placement placement;
        placement.launcher = Launcher::mpirun;
        placement.hosts = std::move(hosts);
        placement.ranks_per_host = ranks_per_host;
        return placement;
    }

    /// Ranks started by srun as steps of a Slurm allocation (see Launcher::slurm),
    /// `ranks_per_node` on each of its nodes in turn; `job` empty: the caller's own.
    static Placement slurm(int ranks_per_node = 1, std::string job = {}) {
        Placement placement;
        placement.launcher = Launcher::slurm;
        placement.ranks_per_host = ranks_per_node;
        placement.slurm_job = std::move(job);
        return placement;
    }
};

/// Ends the node templates this process started on other machines (see
/// Placement::template_idle), and their launchers; a later call starts new ones. They end
/// by themselves when this process ends: this is for giving the hosts back sooner.
MPIFY_API void stop_node_templates() noexcept;

namespace detail {

/// What a call of `remote_ranks` ranks on other machines does with `placement`: a
/// command template and its hosts (Launcher::command: as given; mpirun's and Slurm's:
/// their command, and for Slurm the allocation's nodes and this machine's address toward
/// them); this machine's placement as it is. Throws UsageError naming what is wrong
/// (outside a Slurm allocation: with the salloc line to run). in_ddp resolves once for
/// all its attempts.
MPIFY_API Placement resolve_placement(const Placement& placement, int remote_ranks);

}  // namespace detail

MPIFY_END_NAMESPACE
