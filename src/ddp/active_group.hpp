#pragma once
// The process group of the DdpGuard alive in this process (at most one): opened by the
// guard's constructor, closed by its destructor, used by the ddp helpers and
// DistributedDataParallel in between.
#include "ddp/process_group_state.hpp"

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct DdpSettings;

/// Opens the group `settings` describe and makes it this process's active one. Throws
/// UsageError when a group is active (or opening) already, and whatever opening throws.
const ProcessGroupState& open_active_group(const DdpSettings& settings);

/// Closes the active group (the caller opened it).
void close_active_group() noexcept;

/// Marks the active group abandoned (ProcessGroupState::abandoned); no group: nothing.
void abandon_active_group() noexcept;

/// Whether a group is active in this process.
bool group_is_active();

/// The active group; throws UsageError naming `caller` when there is none.
const ProcessGroupState& active_group(const char* caller);

MPIFY_END_DETAIL_NAMESPACE
