#pragma once
// The process group of the DdpGuard alive in this process (at most one).
#include <mpify/ddp_guard.hpp>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>

namespace mpify::detail {
class ScopedEnvironment;
}

namespace mpify {

struct DdpGuard::State {
    int rank = 0;
    int world_size = 1;
    std::unique_ptr<detail::ScopedEnvironment> environment;
    c10::intrusive_ptr<c10d::Store> store;
    c10::intrusive_ptr<c10d::ProcessGroup> group;
    ~State();
};

namespace detail {

/// Whether a guard is alive in this process.
bool group_is_active();

/// The active guard's state; throws UsageError naming `caller` when there is none.
const DdpGuard::State& active_group(const char* caller);

}  // namespace detail
}  // namespace mpify
