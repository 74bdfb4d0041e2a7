#pragma once
// A node template's agent forker: a process the template forks as it starts, before it
// loads any library, which then forks the node's agents for it. An agent runs mpify's
// code only; forked from the template once the template has loaded a function's library,
// it would map LibTorch too, and a process of LibTorch's size costs milliseconds to fork
// and as many to exit — for each of a call's ranks, in every call.
//
// The agents are forked with CLONE_PARENT (worker/fork_for_parent.hpp): they are the
// template's children, reaped and watched by it as if it had forked them itself. The
// forker has no child and no state: it dies with the template, and if it is gone the
// template forks its agents itself.
#include "common/unique_fd.hpp"
#include "contract/node_template_request.hpp"

#include <sys/types.h>

#include <functional>
#include <memory>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Runs in a new agent, as the template's child: `socket` is its end of the socket to
/// the template. Does not return.
using BecomeAgent = std::function<void(const AgentRequest& request, int socket)>;

class AgentForker {
public:
    /// Forks the forker from this process, which must have a single thread. Null when it
    /// cannot start (the template then forks its agents itself).
    static std::unique_ptr<AgentForker> start(BecomeAgent become_agent);

    /// Has the forker fork an agent for `request`, with `agent_socket` (sent along, not
    /// closed here) as its socket to the template. Returns the agent's pid, a child of
    /// this process; or -1 with errno: EPIPE when the forker is gone, else why the fork
    /// failed.
    pid_t fork_agent(const AgentRequest& request, int agent_socket);

    /// Ends the forker and reaps it.
    ~AgentForker();
    AgentForker(const AgentForker&) = delete;
    AgentForker& operator=(const AgentForker&) = delete;

private:
    AgentForker(UniqueFd socket, pid_t pid) : socket_(std::move(socket)), pid_(pid) {}
    UniqueFd socket_;  // closing it ends the forker
    pid_t pid_;
};

MPIFY_END_DETAIL_NAMESPACE
