#pragma once
// What a template (this machine's, worker/template_server.hpp, or a node's,
// worker/node_template.hpp) does to serve a fork request: load the request's library
// once, refuse when a fork would be unsafe, and turn the forked child into the worker.
#include "common/unique_fd.hpp"
#include "contract/template_protocol.hpp"

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Loads the library at `path` into this process unless it did already; a file that
/// changed on disk since is refused (stale_library): the old copy must not serve it.
/// `origin`, when `path` is a copy: the library's path on the caller's machine. A copy of
/// another build of a library loaded before is refused too (stale_library).
TemplateReply load_library_for_workers(const std::string& path, const std::string& origin = {});

/// How many libraries load_library_for_workers has loaded into this process: a process
/// forked when it was lower lacks the later ones.
std::size_t loaded_library_count();

/// Loads the request's library (if any) and checks this process has a single thread.
/// An ok reply means a fork may follow.
TemplateReply ready_to_fork(const ForkRequest& request);

/// In a child just forked by a template: takes the request's fds (channel, stdout,
/// stderr[, arguments]) and environment, dies with `parent`, names itself `name` (as ps
/// shows it) and serves the call as an exec'd worker does. Never returns.
[[noreturn]] void become_worker(const ForkRequest& request, const std::vector<UniqueFd>& fds, int devnull, pid_t parent,
                                const char* name);

MPIFY_END_DETAIL_NAMESPACE
