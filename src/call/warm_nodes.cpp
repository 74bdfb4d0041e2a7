// mpify::warm_nodes: a placed call's start without its call. An agent per host (one rank
// each, the caller as rank 0) is started through the placement's launcher, which starts
// the host's node template first; each agent places the function's library there, is
// dismissed instead of starting a worker, and answers once its template has loaded the
// library.
#include <mpify/warm_nodes.hpp>

#include "call/call_plan.hpp"
#include "call/deadline.hpp"
#include "call/environment.hpp"
#include "call/interrupt_watch.hpp"
#include "common/posix.hpp"
#include "registry/function_table.hpp"
#include "spawn/launchers/launcher.hpp"
#include "spawn/node_templates.hpp"
#include "spawn/remote_ranks.hpp"
#include "spawn/worker_host.hpp"

#include <mpify/error.hpp>

#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

void warm_nodes(const Options& options, const void* function) {
    fill_standard_fds();
    FunctionEntry entry;
    if (!find_function_by_address(function, entry)) throw UsageError(unregistered_message(function));
    const Placement& wanted = options.placement;
    if (wanted.launcher == Placement::Launcher::this_machine || !uses_node_templates(wanted)) return;
    const std::string label = fmt::format("mpify::warm_nodes({})", entry.name);
    if (options.timeout.count() < 0) throw UsageError(fmt::format("{}: timeout is negative", label));
    const WorkerHost host = choose_worker_host(function, entry.name);
    if (host.library.empty()) throw UsageError(not_on_other_machines_message(label, entry.name));

    const Placement placement = resolve_placement(wanted, 1);
    std::vector<PlacedRank> ranks;  // one per host, in the placement's order
    std::set<std::string> seen;
    for (const std::string& name : placement.hosts)
        if (seen.insert(name).second) ranks.push_back({static_cast<int>(ranks.size()) + 1, name});
    if (ranks.empty()) throw UsageError(fmt::format("{}: the placement names no host", label));
    const int world_size = static_cast<int>(ranks.size()) + 1;
    const std::optional<Clock::time_point> deadline = deadline_of(options);
    InterruptWatch interrupts;
    // The call's variables: those read as libraries load choose the node template.
    RemoteRanks remote(placement, ranks, world_size, deadline,
                       InterruptSignal{interrupts.fd(), [&interrupts] { return interrupts.interrupted(); }},
                       worker_variables(options, world_size));
    for (const PlacedRank& placed : ranks) remote.library_path(placed.rank, host.library, deadline);
    for (const PlacedRank& placed : ranks) remote.dismiss(placed.rank);  // every host loads at once
    for (const PlacedRank& placed : ranks) {
        const std::string why = remote.await_dismissal(placed.rank, deadline);
        if (!why.empty())
            throw SpawnError(fmt::format("{}: the node template on {} could not load {}: {}", label,
                                         remote.host(placed.rank), host.library, why));
    }
}

MPIFY_END_DETAIL_NAMESPACE
