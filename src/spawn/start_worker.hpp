#pragma once
// Starting one worker of a call: its channel and output pipes, then the process itself,
// forked from the warm template of its program or exec'd (see Spawner in options.hpp).
// Whenever the template cannot, the worker is exec'd instead and the reason is logged
// once to stderr.
#include "common/clock.hpp"
#include "spawn/child_process.hpp"
#include "spawn/worker_host.hpp"

#include <mpify/options.hpp>

#include <functional>
#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// The spawner a call uses: MPIFY_SPAWNER when set ("exec" or "template"), else
/// `requested`. Throws UsageError for any other value of MPIFY_SPAWNER.
Spawner effective_spawner(Spawner requested);

/// A started worker and the caller's ends of its fds.
struct StartedWorker {
    ChildProcess process;
    UniqueFd channel;  ///< the caller's end of the worker's channel
    UniqueFd out;      ///< its stdout, with Relay::lines
    UniqueFd err;      ///< its stderr, unless Relay::inherit
    /// A remote rank's stand-in: the caller's end of its control socket (its fd 0,
    /// contract/process_contract.hpp); else closed.
    UniqueFd control;
};

/// Starts a worker of `host` with environment `env` (the whole of it), its output as
/// `relay` says, `shared_args_fd` (or -1) as its fd 4 and `stdin_fd` (or -1: /dev/null)
/// as its fd 0; a warm template's answer is awaited until `deadline` at most (the call's
/// timeout). Throws SpawnError.
StartedWorker start_worker(Spawner spawner, const WorkerHost& host, Relay relay, std::vector<std::string> env,
                           int shared_args_fd, std::optional<Clock::time_point> deadline, int stdin_fd = -1);

/// Makes a process from a worker's LaunchSpec: its fds, environment and program.
using SpawnFunction = std::function<ChildProcess(const LaunchSpec&)>;

/// start_worker with its process made by `spawn` (e.g. a node's template, asked by an
/// agent), which throws what it throws.
StartedWorker start_worker_with(const SpawnFunction& spawn, const WorkerHost& host, Relay relay,
                                std::vector<std::string> env, int shared_args_fd,
                                std::optional<Clock::time_point> deadline, int stdin_fd = -1);

MPIFY_END_DETAIL_NAMESPACE
