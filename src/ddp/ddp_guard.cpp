// DdpGuard: one c10d process group per scope, the process's active group while it lives.
#include "ddp/active_group.hpp"
#include "ddp/ddp_settings.hpp"

#include <mpify/ddp_guard.hpp>

MPIFY_BEGIN_NAMESPACE

DdpGuard::DdpGuard() {
    const detail::ProcessGroupState& group = detail::open_active_group(detail::settings_from_environment());
    rank_ = group.rank;
    world_size_ = group.world_size;
}

DdpGuard::DdpGuard(const DdpOptions& options) {
    const detail::ProcessGroupState& group = detail::open_active_group(detail::settings_from_options(options));
    rank_ = group.rank;
    world_size_ = group.world_size;
}

DdpGuard::~DdpGuard() { detail::close_active_group(); }

MPIFY_END_NAMESPACE
