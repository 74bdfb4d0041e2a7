// DdpOptions::from_environment: a machine's place in a group across machines, read from
// what its launcher set (torchrun's names, Open MPI's mpirun, Slurm's srun).
#include "common/hostlist.hpp"

#include <mpify/ddp_guard.hpp>
#include <mpify/error.hpp>

#include <cstdlib>
#include <fmt/format.h>
#include <optional>

MPIFY_BEGIN_NAMESPACE
namespace {

constexpr int torchrun_default_port = 29500;

std::optional<std::string> variable(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
}

bool present(const char* name) { return variable(name).has_value(); }

// A whole number from 0 to `largest`, or a UsageError naming the variable and the launcher.
long long number(const char* name, const char* launcher, long long largest) {
    const std::string text = *variable(name);
    char* end = nullptr;
    errno = 0;
    const long long value = std::strtoll(text.c_str(), &end, 10);
    if (*end != '\0' || errno != 0 || value < 0 || value > largest)
        throw UsageError(fmt::format("mpify::DdpOptions::from_environment: {}='{}' (set by {}) is not a whole "
                                     "number from 0 to {}",
                                     name, text, launcher, largest));
    return value;
}

int count(const char* name, const char* launcher) { return static_cast<int>(number(name, launcher, 1000000)); }

int required(const char* name, const char* because, const char* launcher) {
    if (!present(name))
        throw UsageError(fmt::format("mpify::DdpOptions::from_environment: {} is set but {} is not; {}", because, name,
                                     launcher));
    return count(name, because);
}

int port_from(const char* launcher, int fallback) {
    if (!present("MASTER_PORT")) return fallback;
    const int port = static_cast<int>(number("MASTER_PORT", launcher, 65535));
    if (port < 1 || port > 65535)
        throw UsageError(fmt::format("mpify::DdpOptions::from_environment: MASTER_PORT={} is not a TCP port", port));
    return port;
}

void place(DdpOptions& o, int node, int nodes, const char* node_name, const char* nodes_name) {
    if (nodes < 1 || node >= nodes)
        throw UsageError(fmt::format("mpify::DdpOptions::from_environment: {}={} does not fit {}={} (node indices "
                                     "run from 0 to {} - 1)",
                                     node_name, node, nodes_name, nodes, nodes_name));
    o.node_rank = node;
    o.nodes = nodes;
}

std::string master_required(const char* launcher, const char* how) {
    if (auto addr = variable("MASTER_ADDR")) return *addr;
    throw UsageError(fmt::format("mpify::DdpOptions::from_environment: under {} the master's address is needed "
                                 "and MASTER_ADDR is not set; {}",
                                 launcher, how));
}

}  // namespace

DdpOptions DdpOptions::from_environment() {
    DdpOptions o;
    if (present("NODE_RANK") || present("GROUP_RANK") || present("NNODES")) {
        const char* launcher = "a torchrun-style launcher";
        const char* node_name = present("NODE_RANK") ? "NODE_RANK" : "GROUP_RANK";
        if (!present(node_name))
            throw UsageError("mpify::DdpOptions::from_environment: NNODES is set but neither NODE_RANK nor "
                             "GROUP_RANK is; set this machine's index among the nodes");
        const int node = count(node_name, launcher);
        if (present("NODE_RANK") && present("GROUP_RANK") && count("GROUP_RANK", launcher) != node)
            throw UsageError(fmt::format("mpify::DdpOptions::from_environment: NODE_RANK={} and GROUP_RANK={} "
                                         "disagree; unset one",
                                         node, count("GROUP_RANK", launcher)));
        place(o, node, required("NNODES", node_name, "set the number of nodes"), node_name, "NNODES");
        o.addr = o.nodes > 1 ? master_required(launcher, "set it to the address of the node with index 0")
                             : variable("MASTER_ADDR").value_or(o.addr);
        o.port = port_from(launcher, torchrun_default_port);
        return o;
    }
    if (present("OMPI_COMM_WORLD_RANK")) {
        const char* launcher = "Open MPI's mpirun";
        place(o, count("OMPI_COMM_WORLD_RANK", launcher),
              required("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "is this mpirun broken?"),
              "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
        o.addr = o.nodes > 1 ? master_required(launcher, "Open MPI does not say which host runs rank 0: pass it, "
                                                         "e.g. mpirun -x MASTER_ADDR=<address of rank 0's host>")
                             : variable("MASTER_ADDR").value_or(o.addr);
        o.port = port_from(launcher, torchrun_default_port);
        return o;
    }
    if (present("SLURM_NNODES") || present("SLURM_NODEID")) {
        const char* launcher = "Slurm";
        const int nodes = required("SLURM_NNODES", "SLURM_NODEID", "is this srun broken?");
        place(o, required("SLURM_NODEID", "SLURM_NNODES", "start the program with srun (one task per node)"), nodes,
              "SLURM_NODEID", "SLURM_NNODES");
        // A batch script has these variables too (as node 0), but it runs once, not per node.
        if (nodes > 1 && !present("SLURM_STEP_ID"))
            throw UsageError(fmt::format("mpify::DdpOptions::from_environment: SLURM_NNODES={} but SLURM_STEP_ID is "
                                         "not set: this is the job's batch script, which runs on the first node only; "
                                         "start the program on every node with srun --ntasks-per-node=1",
                                         nodes));
        if (present("SLURM_NTASKS") && count("SLURM_NTASKS", launcher) != nodes)
            throw UsageError(fmt::format(
                "mpify::DdpOptions::from_environment: Slurm started {} tasks on {} nodes; mpify wants one task per "
                "node (srun --ntasks-per-node=1), which then runs its n local ranks",
                count("SLURM_NTASKS", launcher), nodes));
        if (auto addr = variable("MASTER_ADDR")) {
            o.addr = *addr;
        } else {
            const auto list = present("SLURM_STEP_NODELIST") ? variable("SLURM_STEP_NODELIST")
                                                             : variable("SLURM_JOB_NODELIST");
            if (!list)
                throw UsageError("mpify::DdpOptions::from_environment: under Slurm, neither MASTER_ADDR nor "
                                 "SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set; set MASTER_ADDR");
            o.addr = detail::expand_hostlist(*list).front();
        }
        int fallback_port = torchrun_default_port;
        if (present("SLURM_JOB_ID"))
            fallback_port = 20000 + static_cast<int>(number("SLURM_JOB_ID", launcher, 1LL << 62) % 20000);
        o.port = port_from(launcher, fallback_port);
        return o;
    }
    return o;  // no launcher: one machine
}

MPIFY_END_NAMESPACE
