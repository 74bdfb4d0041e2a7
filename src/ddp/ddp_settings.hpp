#pragma once
// Where a DdpGuard's settings come from: explicit DdpOptions, or the environment that
// in_ddp (or torchrun) prepared. Both end up as one DdpSettings.
#include "common/secret_handshake.hpp"

#include <mpify/ddp_guard.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct DdpSettings {
    int rank = 0;
    int local_rank = 0;
    int local_world_size = 1;  ///< ranks of this call on this machine (LOCAL_WORLD_SIZE)
    int world_size = 1;
    std::string addr;
    int port = 0;
    Backend backend = Backend::automatic;
    std::vector<int> gpus;
    std::chrono::milliseconds timeout{};
    bool cache_tensor_memory = true;  ///< DdpOptions::cache_tensor_memory
    /// Where the group's store is: "unix:/path" (a one-machine in_ddp), "tcp:addr:port",
    /// or empty: rank 0 hosts it at addr:port (a group launched without in_ddp, as torchrun does).
    std::string store;
    /// What the store's connections must prove (a group whose ranks run on other
    /// machines, see Options::placement); none for the others.
    std::optional<CallSecret> store_secret;
    /// The shared memory that in_ddp's caller made for the group before it started the
    /// ranks (SharedSegment's locator, in segment_var), when the ranks are to meet there;
    /// empty when the group's backend makes its own as it forms.
    std::string segment;
};

/// Whether the group is the ranks of one in_ddp call on one machine: they meet at a UNIX
/// socket.
bool ranks_of_one_machine(const DdpSettings& s);

/// The variable that carries a store's secret (hex) to the ranks of an in_ddp group placed
/// on other machines: it travels in the call's environment, over the authenticated link.
constexpr const char* store_secret_var = "MPIFY_DDP_STORE_SECRET";
/// The variable that tells the ranks of a one-machine in_ddp group where the shared memory
/// their caller made for them is (DdpSettings::segment).
constexpr const char* segment_var = "MPIFY_DDP_SEGMENT";

/// Where the ranks of one call sit in the whole group.
struct GroupPlace {
    int base_rank = 0;   ///< global rank of local rank 0
    int world_size = 1;  ///< ranks in the group
    int node_rank = -1;  ///< the machine's index when the group is machines of n ranks each, else -1
};
/// The place of a call of `n` ranks described by `options` (base_rank and world_size, or
/// node_rank and nodes); throws UsageError when they contradict or do not fit. `who` names
/// the API in messages.
GroupPlace place_in_group(const DdpOptions& options, int n, const char* who);

/// Settings from the environment; throws UsageError naming the missing variables.
DdpSettings settings_from_environment();
/// Where settings_from_variables reads a variable: its value, or null when it is unset.
using VariableLookup = std::function<const char*(const char* name)>;
/// The same, read from `lookup` instead of this process's environment: what a rank will
/// find, asked before it starts.
DdpSettings settings_from_variables(const VariableLookup& lookup);
/// DdpOptions::gpus as in_ddp gave them to this process (MPIFY_DDP_GPUS); empty when it
/// gave none. Throws UsageError when the variable is malformed.
std::vector<int> gpus_from_environment();
/// Settings from explicit options and this process's LOCAL_RANK / LOCAL_WORLD_SIZE.
DdpSettings settings_from_options(const DdpOptions& options);
/// The environment in_ddp gives every rank so that settings_from_environment finds them:
/// torchrun's names (RANK comes from the guard itself), and the store at `store`.
std::map<std::string, std::string> environment_for(const DdpOptions& options, const GroupPlace& place,
                                                   const std::string& store, int port);

MPIFY_END_DETAIL_NAMESPACE
