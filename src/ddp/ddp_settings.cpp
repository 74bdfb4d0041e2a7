#include "ddp/ddp_settings.hpp"

#include "common/environment_number.hpp"
#include "ddp/rank_device.hpp"
#include "memory/tensor_memory_cache.hpp"

#include <mpify/error.hpp>
#include <mpify/process.hpp>

#include <climits>
#include <cstdlib>
#include <fmt/format.h>
#include <sstream>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Names of the variables in_ddp sets besides torchrun's MASTER_ADDR / MASTER_PORT / WORLD_SIZE.
constexpr const char* base_rank_var = "MPIFY_DDP_BASE_RANK";
constexpr const char* backend_var = "MPIFY_DDP_BACKEND";
constexpr const char* gpus_var = "MPIFY_DDP_GPUS";
constexpr const char* timeout_var = "MPIFY_DDP_TIMEOUT_MS";
constexpr const char* store_var = "MPIFY_DDP_STORE";

const char* from_process_environment(const char* name) { return std::getenv(name); }

// The variables as settings_from_variables reads them: set and not empty, or null.
class Variables {
public:
    explicit Variables(VariableLookup lookup) : lookup_(std::move(lookup)) {}

    const char* operator()(const char* name) const {
        const char* v = lookup_(name);
        return v && *v ? v : nullptr;
    }
    // The group's settings must be right or refused: a malformed number, or one outside
    // [smallest, largest], is a UsageError naming the variable.
    long long number(const char* name, long long fallback, long long smallest, long long largest) const {
        return whole_number_of(name, (*this)(name), fallback, Malformed::reject, "mpify::DdpGuard", smallest, largest);
    }
    // LOCAL_RANK and LOCAL_WORLD_SIZE as mpify::local_rank() and local_world_size() read them.
    int local_rank() const {
        return static_cast<int>(whole_number_of("LOCAL_RANK", (*this)("LOCAL_RANK"), 0, Malformed::use_fallback,
                                                "mpify", 0, INT_MAX));
    }
    int local_world_size() const {
        return static_cast<int>(whole_number_of("LOCAL_WORLD_SIZE", (*this)("LOCAL_WORLD_SIZE"), 1,
                                                Malformed::use_fallback, "mpify", 1, INT_MAX));
    }

private:
    VariableLookup lookup_;
};

constexpr long long most_ranks = 1000000;  // as DdpOptions::from_environment

// MPIFY_TENSOR_MEMORY_CACHE=0 turns the cache off whatever the options say (a user's
// opt-out for a whole program); 1 or unset leaves `requested`.
bool tensor_memory_cache_wanted(bool requested, const Variables& variables) {
    return requested && variables.number(tensor_memory_cache_var, 1, 0, 1) == 1;
}

Backend parse_backend(const std::string& text) {
    if (text == "gloo") return Backend::gloo;
    if (text == "nccl") return Backend::nccl;
    if (text == "shared_memory") return Backend::shared_memory;
    if (text.empty() || text == "automatic") return Backend::automatic;
    throw UsageError(fmt::format("mpify::DdpGuard: unknown backend '{}' (gloo, nccl, shared_memory or automatic)",
                                 text));
}

const char* backend_name(Backend b) {
    switch (b) {
        case Backend::gloo: return "gloo";
        case Backend::nccl: return "nccl";
        case Backend::shared_memory: return "shared_memory";
        case Backend::automatic: break;
    }
    return "automatic";
}

std::vector<int> parse_gpus(const char* text) {
    std::vector<int> gpus;
    if (!text) return gpus;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');) {
        std::size_t used = 0;
        int gpu = -1;
        try {
            gpu = std::stoi(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != item.size())
            throw UsageError(fmt::format("mpify::DdpGuard: {} is '{}'; it is a list of GPU numbers such as '0,1'",
                                         gpus_var, text));
        gpus.push_back(gpu);
    }
    return gpus;
}

void check(const DdpSettings& s) {
    if (s.world_size < 1)
        throw UsageError(fmt::format("mpify::DdpGuard: world_size must be at least 1 (it is {})", s.world_size));
    if (s.rank < 0 || s.rank >= s.world_size)
        throw UsageError(fmt::format("mpify::DdpGuard: rank {} is outside the group of {} ranks; check base_rank "
                                     "and world_size",
                                     s.rank, s.world_size));
    if (s.port < 0 || s.port > 65535)
        throw UsageError(fmt::format("mpify::DdpGuard: port {} is not a TCP port", s.port));
    check_gpus(s.gpus, s.local_world_size, "mpify::DdpGuard");
}

}  // namespace

std::vector<int> gpus_from_environment() { return parse_gpus(Variables(from_process_environment)(gpus_var)); }

GroupPlace place_in_group(const DdpOptions& options, int n, const char* who) {
    if (n < 1) throw UsageError(fmt::format("{}: n must be at least 1 (it is {})", who, n));
    GroupPlace place;
    if (options.nodes != 1 || options.node_rank != 0) {
        if (options.base_rank != 0 || options.world_size)
            throw UsageError(fmt::format("{}: give either node_rank and nodes, or base_rank and world_size, not "
                                         "both (node_rank {}, nodes {}, base_rank {}, world_size {})",
                                         who, options.node_rank, options.nodes, options.base_rank,
                                         options.world_size ? std::to_string(*options.world_size) : "unset"));
        if (options.nodes < 1 || options.node_rank < 0 || options.node_rank >= options.nodes)
            throw UsageError(fmt::format("{}: node_rank {} is not one of the {} nodes (0 to {})", who,
                                         options.node_rank, options.nodes, options.nodes - 1));
        place.base_rank = options.node_rank * n;
        place.world_size = options.nodes * n;
        place.node_rank = options.node_rank;
        return place;
    }
    place.base_rank = options.base_rank;
    place.world_size = options.world_size.value_or(n);
    if (place.base_rank < 0 || place.base_rank + n > place.world_size)
        throw UsageError(fmt::format("{}: ranks {}..{} of this call do not fit in a group of {} (base_rank {}, n {}, "
                                     "world_size {})",
                                     who, place.base_rank, place.base_rank + n - 1, place.world_size, place.base_rank,
                                     n, place.world_size));
    if (place.base_rank % n == 0) place.node_rank = place.base_rank / n;
    return place;
}

bool ranks_of_one_machine(const DdpSettings& s) { return s.store.rfind("unix:", 0) == 0; }

DdpSettings settings_from_environment() { return settings_from_variables(from_process_environment); }

DdpSettings settings_from_variables(const VariableLookup& lookup) {
    const Variables env(lookup);
    const std::string store = env(store_var) ? env(store_var) : "";
    const bool unix_store = store.rfind("unix:", 0) == 0;  // a one-machine in_ddp: no port
    std::vector<std::string> missing;
    for (const char* name : {"MASTER_ADDR", "MASTER_PORT"})
        if (!env(name) && !(unix_store && std::string(name) == "MASTER_PORT")) missing.push_back(name);
    if (!env("RANK") && !env("LOCAL_RANK")) missing.push_back("RANK (or LOCAL_RANK)");
    if (!env("WORLD_SIZE") && !env("LOCAL_WORLD_SIZE")) missing.push_back("WORLD_SIZE (or LOCAL_WORLD_SIZE)");
    if (!missing.empty()) {
        std::string names;
        for (const std::string& m : missing) names += (names.empty() ? "" : ", ") + m;
        throw UsageError(
            fmt::format("mpify::DdpGuard: the environment lacks {}. Run the function with mpify::in_ddp, which sets "
                        "them, or set them as torchrun does, or construct the guard with mpify::DdpOptions.",
                        names));
    }
    DdpSettings s;
    s.local_rank = env.local_rank();
    s.local_world_size = env.local_world_size();
    s.rank = env(base_rank_var) || !env("RANK")
                 ? static_cast<int>(env.number(base_rank_var, 0, 0, most_ranks)) + s.local_rank
                 : static_cast<int>(env.number("RANK", 0, 0, most_ranks));
    s.world_size = static_cast<int>(env.number("WORLD_SIZE", s.local_world_size, 1, most_ranks));
    s.addr = env("MASTER_ADDR");
    s.port = unix_store ? 0 : static_cast<int>(env.number("MASTER_PORT", 0, 0, 65535));
    s.backend = parse_backend(env(backend_var) ? env(backend_var) : "");
    s.gpus = parse_gpus(env(gpus_var));
    s.timeout = std::chrono::milliseconds(env.number(timeout_var, 5 * 60 * 1000, 1, 365LL * 24 * 3600 * 1000));
    s.store = store;
    if (const char* secret = env(store_secret_var)) {
        try {
            s.store_secret = CallSecret::from_hex(secret);
        } catch (const std::invalid_argument&) {
            throw UsageError(fmt::format("mpify::DdpGuard: {} is not a store secret (64 hexadecimal digits); it is "
                                         "set by mpify::in_ddp, not by hand",
                                         store_secret_var));
        }
    }
    if (const char* segment = env(segment_var); segment != nullptr && unix_store) s.segment = segment;
    s.cache_tensor_memory = tensor_memory_cache_wanted(true, env);
    if (s.port == 0 && !unix_store)
        throw UsageError("mpify::DdpGuard: MASTER_PORT is 0; the port must be the one the rendezvous listens on");
    check(s);
    return s;
}

DdpSettings settings_from_options(const DdpOptions& options) {
    DdpSettings s;
    s.local_rank = local_rank();
    s.local_world_size = local_world_size();
    const GroupPlace place = place_in_group(options, local_world_size(), "mpify::DdpGuard");
    s.rank = place.base_rank + s.local_rank;
    s.world_size = place.world_size;
    s.addr = options.addr;
    s.port = options.port;
    s.backend = options.backend;
    s.gpus = options.gpus;
    s.timeout = options.timeout;
    s.cache_tensor_memory =
        tensor_memory_cache_wanted(options.cache_tensor_memory, Variables(from_process_environment));
    if (s.port == 0)
        throw UsageError("mpify::DdpGuard: port 0 (a free port) needs mpify::in_ddp to choose it and tell every "
                         "rank; with an explicit DdpGuard give the port");
    check(s);
    return s;
}

std::map<std::string, std::string> environment_for(const DdpOptions& options, const GroupPlace& place,
                                                   const std::string& store, int port) {
    std::string gpus;
    for (int g : options.gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
    std::map<std::string, std::string> e{
        {"MASTER_ADDR", options.addr},
        {"WORLD_SIZE", std::to_string(place.world_size)},
        {base_rank_var, std::to_string(place.base_rank)},
        {backend_var, backend_name(options.backend)},
        {timeout_var, std::to_string(options.timeout.count())},
    };
    if (!gpus.empty()) e[gpus_var] = gpus;
    if (!options.cache_tensor_memory) e[tensor_memory_cache_var] = "0";
    if (port != 0) e["MASTER_PORT"] = std::to_string(port);
    // torchrun's index of this machine, when the ranks per machine make one.
    if (place.node_rank >= 0) e["GROUP_RANK"] = std::to_string(place.node_rank);
    e[store_var] = store;  // hosted by the caller with base_rank 0, for every machine
    // None unless this call's caller makes one (not an outer call's, inherited).
    e[segment_var] = "";
    return e;
}

MPIFY_END_DETAIL_NAMESPACE
