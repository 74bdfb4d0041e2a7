#pragma once
// The caller's warm templates, one per worker program, started on first use and
// replaced when they die, go stale or were started with another load-time environment.
#include "spawn/child_process.hpp"
#include "spawn/worker_host.hpp"

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Starts a worker of `host` as `spec` says, forked from the program's warm template;
/// by exec when the template cannot (the reason is logged once to stderr).
/// Throws SpawnError.
ChildProcess spawn_from_template(const WorkerHost& host, const LaunchSpec& spec);

MPIFY_END_DETAIL_NAMESPACE
