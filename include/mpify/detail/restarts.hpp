#pragma once
// Options::restarts, the compiled loop behind ranch and in_ddp: a call that failed runs
// again, whole, until an attempt succeeds or the restarts run out.
#include <mpify/abi.hpp>
#include <mpify/export.hpp>
#include <mpify/options.hpp>

#include <functional>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Runs `attempt` with each attempt's options — restarts 0, MPIFY_RESTART_COUNT set in
/// env, the timeout what is left of the whole call's — and its number of ranks, until it
/// returns, at most 1 + options.restarts times. `last_attempt` tells it that no restart
/// follows (it may move its arguments then). An interrupt, a timeout, a usage error and a
/// worker that cannot be started are never retried. With Options::min_ranks and a
/// placement on other machines, the hosts of lost ranks are left out of the attempts that
/// follow (the placement resolved once, its hosts listed) and the number of ranks shrinks
/// to what the others hold, never below min_ranks. `function` and `api`
/// ("mpify::in_ddp") name the call in messages; `n` is its ranks. `arguments_reusable`:
/// whether the caller's rank can call fn on its arguments again (not when one can only
/// be moved): restarts are refused otherwise.
MPIFY_API void run_with_restarts(const Options& options, const void* function, const char* api, int n,
                                 bool arguments_reusable,
                                 const std::function<void(const Options& attempt, int n, bool last_attempt)>& attempt);

MPIFY_END_DETAIL_NAMESPACE
