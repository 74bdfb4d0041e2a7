#pragma once
// The calls running in this process, for mpify::where() from any thread.
#include "forensics/stack_collector.hpp"

#include <mpify/abi.hpp>

#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

class Supervisor;

/// A supervisor is listed from its construction to its destruction.
void list_running_call(const Supervisor* call);
void unlist_running_call(const Supervisor* call) noexcept;

/// The ranks running now in every listed call.
std::vector<StackTarget> ranks_of_running_calls();

MPIFY_END_DETAIL_NAMESPACE
