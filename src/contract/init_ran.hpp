#pragma once
// Whether mpify::init ran in this process: the program can host its own functions only
// then (a worker started as /proc/self/exe must reach mpify::init to serve the call).
// worker/process.cpp records it; spawn/ asks before choosing the program as host.

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// True once mpify::init has been called in this process.
bool init_ran() noexcept;

MPIFY_END_DETAIL_NAMESPACE
