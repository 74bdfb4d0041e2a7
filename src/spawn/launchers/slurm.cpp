// Slurm: srun starts each remote rank's agent as a step of an allocation (the caller's
// own, or a named job's) on its nodes, and a program srun started reads its place from
// SLURM_NODEID, SLURM_NNODES and the step's node list. A named job's nodes and the
// caller's address toward them are asked of Slurm at its first call, and again after a
// call on it failed; never polled.
#include "common/debug_log.hpp"
#include "common/endpoint.hpp"
#include "common/shell_quoted.hpp"
#include "spawn/launchers/each_launcher.hpp"
#include "spawn/launchers/launcher_variables.hpp"
#include "spawn/launchers/slurm_hostlist.hpp"
#include "spawn/command_output.hpp"

#include <mpify/error.hpp>

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <mutex>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

constexpr std::chrono::seconds slurm_query_limit{10};

std::string trimmed(const std::string& text) {
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";
    return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// The job Placement::slurm names, else this process's own (SLURM_JOB_ID); "" if neither.
std::string job_of(const Placement& placement) {
    const char* own = std::getenv("SLURM_JOB_ID");
    return !placement.slurm_job.empty() ? placement.slurm_job : own != nullptr ? own : "";
}

std::string allocation_of(const Placement& placement, int remote_ranks) {
    const std::string job = job_of(placement);
    const int per_node = std::max(1, placement.ranks_per_host);
    if (job.empty())
        throw UsageError(fmt::format(
            "mpify: Placement::slurm runs the ranks in a Slurm allocation, and this process is in none (SLURM_JOB_ID "
            "is not set). Allocate the nodes, then start this program (or Jupyter) in the shell that salloc opens:\n"
            "    salloc --nodes={} --ntasks-per-node={}\n"
            "or give the job id of an allocation you hold: mpify::Placement::slurm({}, \"<job id>\").",
            std::max(1, (remote_ranks + per_node - 1) / per_node), per_node, per_node));
    if (job.find_first_not_of("0123456789_") != std::string::npos)
        throw UsageError(fmt::format("mpify: Placement::slurm: '{}' is not a Slurm job id (digits, as squeue shows "
                                     "them)",
                                     job));
    return job;
}

// What Slurm told this process: the nodes of each named job, and the NodeAddr of each node
// whose name does not resolve here. A running job keeps its nodes, and each query is a
// round trip to Slurm's controller, which a busy cluster answers slowly and its admins
// would rather not see at every call; forget_slurm_answers drops them after a failed
// call (the job may have ended), so the next call asks again and says so.
struct SlurmAnswers {
    std::mutex lock;
    std::map<std::string, std::vector<std::string>> nodes_of_job;
    std::map<std::string, std::string> address_of_node;
};

SlurmAnswers& slurm_answers() {
    static SlurmAnswers answers;
    return answers;
}

std::vector<std::string> nodes_of(const std::string& job) {
    const char* own = std::getenv("SLURM_JOB_ID");
    const char* own_nodes = std::getenv("SLURM_JOB_NODELIST");
    if (own != nullptr && job == own && own_nodes != nullptr && *own_nodes != '\0') return expand_hostlist(own_nodes);
    SlurmAnswers& known = slurm_answers();
    {
        const std::lock_guard<std::mutex> lock(known.lock);
        const auto found = known.nodes_of_job.find(job);
        if (found != known.nodes_of_job.end()) {
            debug_line(fmt::format("Placement::slurm: the nodes of job {} as found at an earlier call (no squeue)",
                                   job));
            return found->second;
        }
    }
    const std::string query = "squeue --noheader --jobs=" + shell_quoted(job) + " --format=%N";
    const CommandOutput answer = command_output(query, slurm_query_limit);
    const std::string nodes = trimmed(answer.output);
    if (!answer.succeeded || nodes.empty() || nodes.find_first_of(" \t\n(") != std::string::npos)
        throw UsageError(fmt::format("mpify: Placement::slurm: cannot find the nodes of job {}: `{}` said \"{}\" ({}). "
                                     "Is the job running (not pending or ended), and is it yours?",
                                     job, query, nodes, answer.how));
    std::vector<std::string> expanded = expand_hostlist(nodes);
    const std::lock_guard<std::mutex> lock(known.lock);
    known.nodes_of_job[job] = expanded;
    return expanded;
}

// This machine's address toward `node`, for the agents to connect back to: by the node's
// name where this machine resolves it, else by the address Slurm reaches it at (NodeAddr:
// clusters whose node names resolve only among the nodes).
std::string caller_address_toward(const std::string& node) {
    SlurmAnswers& known = slurm_answers();
    {
        const std::lock_guard<std::mutex> lock(known.lock);
        const auto found = known.address_of_node.find(node);
        if (found != known.address_of_node.end()) return local_address_toward(found->second);
    }
    try {
        return local_address_toward(node);
    } catch (const UsageError&) {
    }
    const std::string query = "scontrol show node --oneliner " + shell_quoted(node);
    const CommandOutput answer = command_output(query, slurm_query_limit);
    const std::string key = "NodeAddr=";
    const auto at = answer.output.find(key);
    if (!answer.succeeded || at == std::string::npos)
        throw UsageError(fmt::format("mpify: Placement::slurm: this machine does not resolve the node name {}, and "
                                     "`{}` gave no NodeAddr ({}); set Placement::caller_address to this machine's "
                                     "address that the nodes reach",
                                     node, query, answer.how));
    const auto start = at + key.size();
    const std::string address = answer.output.substr(start, answer.output.find_first_of(" \t\n", start) - start);
    debug_line(fmt::format("Placement::slurm: node {} is {} (NodeAddr)", node, address));
    std::string toward = local_address_toward(address);
    const std::lock_guard<std::mutex> lock(known.lock);
    known.address_of_node[node] = address;
    return toward;
}

}  // namespace

Placement resolve_slurm(const Placement& placement, int remote_ranks) {
    Placement resolved = placement;
    const std::string job = allocation_of(placement, remote_ranks);
    if (resolved.hosts.empty()) resolved.hosts = nodes_of(job);
    debug_line(fmt::format("Placement::slurm: job {}, nodes {}", job, fmt::join(resolved.hosts, " ")));
    if (resolved.caller_address.empty() && !resolved.hosts.empty())
        resolved.caller_address = caller_address_toward(resolved.hosts.front());
    // One step per rank, sharing the allocation's CPUs with the caller's own step, if any;
    // srun passes its stdin (the secret) to the step's one task.
    resolved.command = fmt::format("srun --jobid={} --overlap --nodes=1 --ntasks=1 --nodelist=%H --kill-on-bad-exit=1 "
                                   "--quiet {}%C",
                                   job, template_words(placement.launcher_options));
    resolved.launcher = Placement::Launcher::command;
    return resolved;
}

void forget_slurm_answers(const Placement& placement) noexcept {
    SlurmAnswers& known = slurm_answers();
    const std::lock_guard<std::mutex> lock(known.lock);
    known.nodes_of_job.erase(job_of(placement));
    known.address_of_node.clear();
}

std::optional<LaunchedPlace> slurm_place() {
    if (!present("SLURM_NNODES") && !present("SLURM_NODEID")) return std::nullopt;
    const char* launcher = "Slurm";
    const int nodes = required("SLURM_NNODES", "SLURM_NODEID", "is this srun broken?");
    LaunchedPlace place =
        place_of_node(required("SLURM_NODEID", "SLURM_NNODES", "start the program with srun (one task per node)"),
                      nodes, "SLURM_NODEID", "SLURM_NNODES");
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
        place.addr = *addr;
    } else {
        const auto list = present("SLURM_STEP_NODELIST") ? variable("SLURM_STEP_NODELIST")
                                                         : variable("SLURM_JOB_NODELIST");
        if (!list)
            throw UsageError("mpify::DdpOptions::from_environment: under Slurm, neither MASTER_ADDR nor "
                             "SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set; set MASTER_ADDR");
        place.addr = expand_hostlist(*list).front();
    }
    int fallback_port = torchrun_default_port;
    if (present("SLURM_JOB_ID"))
        fallback_port = 20000 + static_cast<int>(number("SLURM_JOB_ID", launcher, 1LL << 62) % 20000);
    place.port = port_from(launcher, fallback_port);
    return place;
}

MPIFY_END_DETAIL_NAMESPACE
