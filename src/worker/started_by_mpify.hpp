#pragma once
// The check a process makes before it serves as a worker or a template: the variable
// that says so (process_contract.hpp) came with the channel mpify gives with it. Both
// can only come from mpify; a variable exported by hand in a shell would otherwise make
// every program that calls mpify::init exit without a word.
#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Returns the channel fd named by `variable` (MPIFY_WORKER_FD or MPIFY_TEMPLATE_FD)
/// when it is a socket; otherwise says on stderr what is wrong and exits with 70.
int channel_from_environment(const char* variable);

MPIFY_END_DETAIL_NAMESPACE
