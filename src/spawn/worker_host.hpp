#pragma once
// How a fresh process comes to hold the function: the two worker hosts (docs/api.md,
// "Where a worker comes from").
//
//  - program host: the function is in the main executable; the worker is
//    /proc/self/exe, whose mpify::init() serves the call.
//  - library host: the function is in a shared library (always so in an interpreter);
//    the worker is mpify-worker, which loads that library and serves the call.
#include <optional>
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct WorkerHost {
    std::string executable;         ///< what to exec
    std::vector<std::string> argv;  ///< its argv
    std::string library;            ///< for the library host: what the worker loads
};

/// Chooses the host for the registered function at `address`, named `name` in messages.
/// Throws UsageError when no host can run it (interpreter memory, missing mpify::init)
/// and SpawnError when mpify-worker cannot be found.
WorkerHost choose_worker_host(const void* address, const std::string& name);

/// One of mpify's programs (mpify-worker, mpify-stacks): next to libmpify or in the
/// installed bin folder; nullopt when it is in neither.
std::optional<std::string> find_mpify_program(const std::string& name);

/// The mpify-worker program: $MPIFY_WORKER_PROGRAM, else next to libmpify or in the
/// installed bin folder. Throws SpawnError naming where it looked.
std::string find_mpify_worker();

MPIFY_END_DETAIL_NAMESPACE
