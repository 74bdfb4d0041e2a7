#pragma once
// Who am I? The process-level entry point and rank queries.
#include <mpify/abi.hpp>
#include <mpify/export.hpp>

MPIFY_BEGIN_NAMESPACE

/// Call first thing in `main` of every program that ranches functions defined in the
/// program itself. In a worker started by mpify this serves the call and ends the
/// process (it never returns); in any other process it returns at once.
MPIFY_API void init(int argc, char** argv);

/// This process's rank among the processes of the current ranch call: LOCAL_RANK, or 0
/// outside any call.
MPIFY_API int local_rank();

/// Number of processes of the current ranch call: LOCAL_WORLD_SIZE, or 1 outside any call.
MPIFY_API int local_world_size();

/// Which attempt of the current call this is: 0 on the first, k on the k-th restart
/// (Options::restarts), the same in every rank; 0 outside any call. Read from the
/// environment variable MPIFY_RESTART_COUNT, which mpify sets in every rank.
MPIFY_API int restart_count();

/// True in a process that mpify started to serve a call.
MPIFY_API bool is_worker();

MPIFY_END_NAMESPACE
