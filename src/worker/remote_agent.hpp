#pragma once
// A remote rank's agent: the process a launcher (srun, mpirun, ssh, a command template)
// starts on another machine. Once connected back to the caller and proven
// (worker/connect_back_worker.hpp), it starts the rank's worker on its machine as the
// caller starts a local one (exec, channel, output pipes) and relays everything over the
// link (contract/remote_link.hpp): the call's frames both ways, the worker's output, how it
// ended, the caller's signals. The worker dies with the agent (PDEATHSIG), and the agent
// ends the worker when the link ends or falls silent: nothing outlives a caller that is
// gone, whatever the launcher does.
#include "common/unique_fd.hpp"

#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Serves one remote rank over `link` (connected and proven) and ends the process: exit
/// status 0 once the worker's end is reported, 70 when the link failed first (said on
/// stderr with `caller`, the caller's address). With `node_template` open (this agent was
/// forked by its node's template, worker/node_template.hpp), the worker is forked by that
/// template, which reaps it and says how it ended; exec'd when the template cannot.
[[noreturn]] void run_remote_agent(UniqueFd link, const std::string& caller, int rank, UniqueFd node_template);

MPIFY_END_DETAIL_NAMESPACE
