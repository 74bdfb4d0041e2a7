#pragma once
// A node's template: mpify-worker started once per node by a caller that places ranks on
// other machines (spawn/node_templates.hpp), through the placement's launcher (srun,
// mpirun, ssh), and kept across that caller's calls. For each remote rank of a call the
// caller writes a request on its stdin (contract/node_template_request.hpp); the template
// has the rank's agent forked (by its agent forker, worker/agent_forker.hpp, which maps no
// library), which connects back as a launched agent does, and then forks the rank's
// worker for that agent, from a process that has the function's library (and so
// LibTorch) loaded already: a call's ranks start in milliseconds, not in the seconds a
// fresh process takes to load LibTorch on each. Between calls it forks spares, which the
// next call's workers become when asked: no fork of LibTorch's size while a call starts.
//
// The workers are the template's children, not their agents': the template tells each
// agent, on a socket of their own, the worker's pid and pidfd and, once it has reaped it,
// how it ended (contract/template_protocol.hpp). An agent gone takes its workers with it.
//
// Lifetime: the template ends when its stdin ends (its caller ended, or stopped it), and
// after MPIFY_NODE_TEMPLATE seconds without agents or workers; with it go its agents and
// their workers (PDEATHSIG). Its launcher ends with it, and so does a Slurm step.
//
// It stays fork-safe as the local template does (worker/template_server.hpp): one thread,
// no user code, no tensors. Once a fork would be unsafe (a library started a thread), or
// a library changed on disk, workers are exec'd by their agents instead, agents by the
// template, and it ends as soon as it is idle, for the caller to start a fresh one.

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// If this process was started as a node's template (MPIFY_NODE_TEMPLATE is set), serves
/// requests until its stdin ends or it has been idle for the time the variable says, and
/// ends the process; otherwise returns. The agents and workers it forks do not return.
void serve_if_node_template();

MPIFY_END_DETAIL_NAMESPACE
