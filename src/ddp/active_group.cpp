#include "ddp/active_group.hpp"

#include "common/scoped_environment.hpp"
#include "ddp/open_group.hpp"
#include "ddp/sigpipe_block.hpp"
#include "forensics/collective_record.hpp"
#include "store/server.hpp"

#include <mpify/error.hpp>
#include <mpify/tensor_memory.hpp>

#include <fmt/format.h>
#include <mutex>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

std::mutex active_mutex;
std::unique_ptr<ProcessGroupState> active;  // guarded by active_mutex
// Claimed before a group opens, so a second guard fails before joining anything.
bool claimed = false;                       // guarded by active_mutex

}  // namespace

ProcessGroupState::~ProcessGroupState() {
    if (abandoned && formed) formed->abandon();
    formed.reset();  // joins the group's threads before the store they talk through goes
    store.reset();
    store_server.reset();
}

const ProcessGroupState& open_active_group(const DdpSettings& settings) {
    {
        std::lock_guard lock(active_mutex);
        if (claimed)
            throw UsageError("mpify::DdpGuard: another DdpGuard is active in this process; guards cannot be "
                             "nested or used from two threads at once. Let the first one end first.");
        claimed = true;
    }
    std::unique_ptr<ProcessGroupState> opened;
    try {
        opened = open_group(settings);
    } catch (...) {
        std::lock_guard lock(active_mutex);
        claimed = false;
        throw;
    }
    open_collective_record(opened->rank, opened->world_size);
    std::lock_guard lock(active_mutex);
    active = std::move(opened);
    return *active;
}

void close_active_group() noexcept {
    std::unique_ptr<ProcessGroupState> closing;
    {
        std::lock_guard lock(active_mutex);
        closing = std::move(active);
    }
    close_collective_record();
    closing.reset();  // outside the lock: it joins Gloo's threads
    std::lock_guard lock(active_mutex);
    claimed = false;
}

void abandon_active_group() noexcept {
    std::lock_guard lock(active_mutex);
    if (active != nullptr) active->abandoned = true;
}

bool group_is_active() {
    std::lock_guard lock(active_mutex);
    return active != nullptr;
}

const ProcessGroupState& active_group(const char* caller) {
    std::lock_guard lock(active_mutex);
    if (active == nullptr)
        throw UsageError(fmt::format("{}: no mpify::DdpGuard is active in this process; call it inside a function "
                                     "run by mpify::in_ddp, or inside a DdpGuard scope",
                                     caller));
    return *active;
}

MPIFY_END_DETAIL_NAMESPACE
