#pragma once
// The warm template's side: a process started once per caller (by exec, like a worker),
// that has loaded LibTorch and the libraries holding the functions and then only waits
// for requests to fork workers.
//
// The rules that keep it fork-safe (see Spawner in options.hpp): it starts no thread
// (it counts them before every fork and refuses if there is more than one), never
// initializes CUDA, never runs a user function and never computes with tensors. Loading
// a library runs that library's static initializers, nothing else.
//
// Each worker is forked as the caller's child (fork_for_parent.hpp), takes the fds and
// environment the caller sent, and from there on is exactly an exec'd worker.

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// If this process was started as a template (MPIFY_TEMPLATE_FD is set), serves fork
/// requests until the caller closes its end, then ends the process; otherwise returns.
/// The workers it forks return from this call into serve_if_worker.
void serve_if_template();

MPIFY_END_DETAIL_NAMESPACE
