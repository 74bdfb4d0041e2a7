#pragma once
// A remote rank's way back to its caller: a launcher (srun, mpirun, ssh, a command
// template) started mpify-worker on another machine with the way back in its
// environment (contract/process_contract.hpp). It connects, proves its rank with the
// call's secret (common/secret_handshake.hpp), checks that the other end is the caller,
// and then becomes the rank's agent (worker/remote_agent.hpp).

#include "common/secret_handshake.hpp"
#include "common/unique_fd.hpp"

#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// If MPIFY_CONNECT is set: takes the secret out of the environment, or from the first
/// line of stdin when the environment has none (neither the function nor what it starts
/// sees it), connects back and serves the rank as its agent, and ends the process. When
/// the caller cannot be reached or does not prove itself, says so on stderr (naming the
/// caller's address and the reason, never the secret) and exits with 70. Otherwise returns.
void serve_if_connecting();

/// Connects to the caller at `where` (MPIFY_CONNECT's form), proves `rank` with `secret`
/// and serves the rank as its agent; `node_template`, when open, is the socket to the
/// node's template that forked this agent, which then forks the rank's worker. Never
/// returns: ends the process (with 70, saying why on stderr, when the caller cannot be
/// reached or does not prove itself).
[[noreturn]] void join_caller_as_agent(const std::string& where, const CallSecret& secret, int rank,
                                       UniqueFd node_template);

MPIFY_END_DETAIL_NAMESPACE
