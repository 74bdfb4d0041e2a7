#pragma once
// A remote rank's stand-in: a process on the caller's machine that the call's supervisor
// watches exactly as it watches a local worker — a child with a pidfd, the channel at
// its fd 3, output pipes at its fds 1 and 2 — while the rank runs on another machine
// behind its agent (worker/remote_agent.hpp). It relays the channel both ways over the
// link (contract/remote_link.hpp), writes the remote worker's output to its own stdout
// and stderr, forwards the signals the supervisor sends it (SIGTERM), and ends as the
// remote worker ended: the same exit code, or killed by the same signal. So timeouts,
// interrupts, failure reports, stderr tails and reaping need nothing new in the caller.
//
// When the link ends before the rank's end came, or stays silent past
// link_silence_limit, it says so on stderr (the rank, its host, what was seen) and exits
// with lost_rank_exit_code (contract/remote_link.hpp). SIGKILL ends it at once; its link then closes, and the
// agent ends the remote worker.

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// If MPIFY_STAND_IN is set: stands in for that remote rank until it ends, and ends the
/// process as it ended. Otherwise returns.
void serve_if_standing_in();

MPIFY_END_DETAIL_NAMESPACE
