#pragma once
// What in_ddp's caller prepares for the shared-memory backend before it starts the ranks
// of a one-machine group: the memory their group will meet in, so that forming it is one
// meeting there and no round through the store (shared_memory_backend.cpp).
#include "ddp/backends/shared_memory/shared_segment.hpp"

#include <map>
#include <optional>
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// The segment for a group of `n` ranks on this machine whose guards will read their
/// settings from `environment` (environment_for's, over this process's environment), when
/// the backend they will choose is the shared-memory one and it can be made; none
/// otherwise (the ranks then form as usual). The caller keeps it until the call ends and
/// gives the ranks its locator in segment_var.
std::optional<SharedSegment> segment_ahead_of_ranks(const std::map<std::string, std::string>& environment, int n);

MPIFY_END_DETAIL_NAMESPACE
