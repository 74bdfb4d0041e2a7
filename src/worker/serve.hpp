#pragma once
// The worker's side of a call: read it from the channel, load what holds the function,
// run it (inside its context), send back the result or the failure, and end the process.

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// If this process was started by mpify as a worker (MPIFY_WORKER_FD is set), serves the
/// call and ends the process; otherwise returns.
void serve_if_worker();

/// Serves the call that comes on `channel_fd` (the caller's channel, however it was
/// made) and ends the process.
[[noreturn]] void serve_as_worker(int channel_fd);

/// True once this process has started serving a call as a worker.
bool is_worker_process();

MPIFY_END_DETAIL_NAMESPACE
