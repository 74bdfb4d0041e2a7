#pragma once
// Where a DdpGuard's settings come from: explicit DdpOptions, or the environment that
// in_ddp (or torchrun) prepared. Both end up as one DdpSettings.
#include <mpify/ddp_guard.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace mpify::detail {

struct DdpSettings {
    int rank = 0;
    int local_rank = 0;
    int world_size = 1;
    std::string addr;
    int port = 0;
    Backend backend = Backend::automatic;
    std::vector<int> gpus;
    std::chrono::milliseconds timeout{};
    bool store_hosted = false;  ///< the caller hosts the store: every rank is a client
};

/// Settings from the environment; throws UsageError naming the missing variables.
DdpSettings settings_from_environment();
/// Settings from explicit options and this process's LOCAL_RANK / LOCAL_WORLD_SIZE.
DdpSettings settings_from_options(const DdpOptions& options);
/// The environment in_ddp gives every rank so that settings_from_environment finds them.
std::map<std::string, std::string> environment_for(const DdpOptions& options, int world_size, int port);

}  // namespace mpify::detail
