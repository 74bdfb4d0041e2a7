#pragma once
// mpify::warm_nodes: the first use of a placement's machines, paid ahead of the first call.
//
//   mpify::Options options;
//   options.placement = mpify::Placement::slurm();
//   mpify::warm_nodes(options, train);     // in one notebook cell: under a second, once
//   ...
//   mpify::in_ddp(options, 8, train, cfg);  // a later cell: starts its ranks in milliseconds
#include <mpify/abi.hpp>
#include <mpify/export.hpp>
#include <mpify/options.hpp>

MPIFY_BEGIN_NAMESPACE

namespace detail {
/// warm_nodes for the registered function at `function`.
MPIFY_API void warm_nodes(const Options& options, const void* function);
}  // namespace detail

/// Starts the node template of every host of `options.placement` (see
/// Placement::template_idle) and has each load the shared library that holds `fn`, and
/// LibTorch with it for a LibTorch function, shipping the library to hosts that lack it
/// as a call would: the first call of `fn` with these options then starts its ranks as
/// a later call does. Returns once every host's template runs and has loaded the library
/// (all hosts load at once). Where there is
/// nothing to warm it returns at once: a placement on this machine, or node templates
/// turned off (template_idle 0, MPIFY_SPAWNER=exec). Throws what a call would before its
/// ranks start: UsageError for `fn` not registered or compiled into the program itself, or
/// a placement that cannot work; SpawnError naming the host (as "rank k", k counting the
/// hosts from 1) when a launcher or an agent fails, or naming the host and the reason when
/// its template cannot load the library; Interrupted on request_interrupt().
/// options.timeout, when set, bounds it.
template <class R, class... P>
void warm_nodes(const Options& options, R (*fn)(P...)) {
    detail::warm_nodes(options, reinterpret_cast<const void*>(fn));
}

MPIFY_END_NAMESPACE
