#pragma once
// Starting one worker process, by exec or forked from the warm template of its program
// (see Spawner in options.hpp). Whenever the template cannot, the worker is exec'd
// instead and the reason is logged once to stderr.
#include "child_process.hpp"
#include "worker_host.hpp"

#include <mpify/options.hpp>

namespace mpify::detail {

/// The spawner a call uses: MPIFY_SPAWNER when set ("exec" or "template"), else
/// `requested`. Throws UsageError for any other value of MPIFY_SPAWNER.
Spawner effective_spawner(Spawner requested);

/// Starts a worker of `host` with the fds and environment of `spec`.
ChildProcess start_process(Spawner spawner, const WorkerHost& host, const LaunchSpec& spec);

}  // namespace mpify::detail
