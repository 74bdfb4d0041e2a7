#include "spawn/launchers/launcher_variables.hpp"

#include <mpify/error.hpp>

#include <cerrno>
#include <cstdlib>
#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE

std::optional<std::string> variable(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
}

bool present(const char* name) { return variable(name).has_value(); }

long long number(const char* name, const char* launcher, long long largest) {
    const std::string text = *variable(name);
    char* end = nullptr;
    errno = 0;
    const long long value = std::strtoll(text.c_str(), &end, 10);
    if (*end != '\0' || errno != 0 || value < 0 || value > largest)
        throw UsageError(fmt::format("mpify::DdpOptions::from_environment: {}='{}' (set by {}) is not a whole "
                                     "number from 0 to {}",
                                     name, text, launcher, largest));
    return value;
}

int count(const char* name, const char* launcher) { return static_cast<int>(number(name, launcher, 1000000)); }

int required(const char* name, const char* because, const char* what_to_do) {
    if (!present(name))
        throw UsageError(fmt::format("mpify::DdpOptions::from_environment: {} is set but {} is not; {}", because, name,
                                     what_to_do));
    return count(name, because);
}

int port_from(const char* launcher, int fallback) {
    if (!present("MASTER_PORT")) return fallback;
    const int port = static_cast<int>(number("MASTER_PORT", launcher, 65535));
    if (port < 1 || port > 65535)
        throw UsageError(fmt::format("mpify::DdpOptions::from_environment: MASTER_PORT={} is not a TCP port", port));
    return port;
}

std::string master_required(const char* launcher, const char* how) {
    if (auto addr = variable("MASTER_ADDR")) return *addr;
    throw UsageError(fmt::format("mpify::DdpOptions::from_environment: under {} the master's address is needed "
                                 "and MASTER_ADDR is not set; {}",
                                 launcher, how));
}

LaunchedPlace place_of_node(int node, int nodes, const char* node_name, const char* nodes_name) {
    if (nodes < 1 || node >= nodes)
        throw UsageError(fmt::format("mpify::DdpOptions::from_environment: {}={} does not fit {}={} (node indices "
                                     "run from 0 to {} - 1)",
                                     node_name, node, nodes_name, nodes, nodes_name));
    LaunchedPlace place;
    place.node_rank = node;
    place.nodes = nodes;
    return place;
}

void set_master_address(LaunchedPlace& place, const char* launcher, const char* how) {
    place.addr = place.nodes > 1 ? master_required(launcher, how) : variable("MASTER_ADDR");
}

MPIFY_END_DETAIL_NAMESPACE
