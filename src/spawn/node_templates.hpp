#pragma once
// The caller's node templates (worker/node_template.hpp is the other side): one per
// launcher command, i.e. per host, worker program and load-time environment, started on
// first use and kept across calls; each call's remote ranks are asked of it on its stdin.
//
// A template ends when this process does (its stdin closes), after its idle time, when
// it could no longer fork safely, or by stop_node_templates(); the next call starts a
// new one. One whose launcher has ended is replaced on use.
#include "contract/node_template_request.hpp"
#include "spawn/launcher_process.hpp"

#include <mpify/placement.hpp>

#include <memory>
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Whether calls with `placement` start their remote ranks from node templates: unless its
/// template_idle is 0 or MPIFY_SPAWNER=exec.
bool uses_node_templates(const Placement& placement);

/// A running node template as the caller holds it.
struct NodeTemplate {
    std::unique_ptr<LauncherProcess> launcher;
    UniqueFd requests;  // its stdin
};

/// The node template that `command` (a launcher command starting mpify-worker as a
/// node's template on one host) runs, started now unless it runs already. Throws
/// SpawnError when the launcher cannot start.
std::shared_ptr<NodeTemplate> node_template(const std::string& command);

/// Asks `node` for an agent. False when its stdin no longer takes a line (it ended, or
/// stopped reading).
bool ask_for_agent(NodeTemplate& node, const AgentRequest& request);

/// Ends the node template of `command` (its agents failed a call): closes its stdin and
/// stops its launcher. The next node_template(command) starts a new one.
void discard_node_template(const std::string& command) noexcept;

MPIFY_END_DETAIL_NAMESPACE
