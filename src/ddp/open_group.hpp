#pragma once
// Opening one c10d process group: the backend and the device, the rendezvous through
// the group's store, then the group itself.
#include "ddp/ddp_settings.hpp"
#include "ddp/process_group_state.hpp"

#include <memory>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (restored when the state ends),
/// binds the process to its GPU when NCCL is used, meets every rank at the store and
/// creates the group. Throws UsageError for settings this build cannot serve, and Error
/// naming the missing ranks when some do not arrive within the timeout.
std::unique_ptr<ProcessGroupState> open_group(const DdpSettings& settings);

MPIFY_END_DETAIL_NAMESPACE
