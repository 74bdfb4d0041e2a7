// torchrun and the launchers that set its names (NODE_RANK or GROUP_RANK, NNODES,
// MASTER_ADDR, MASTER_PORT): a place only, since mpify starts no ranks through it.
#include "spawn/launchers/each_launcher.hpp"
#include "spawn/launchers/launcher_variables.hpp"

#include <mpify/error.hpp>

#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE

std::optional<LaunchedPlace> torchrun_place() {
    if (!present("NODE_RANK") && !present("GROUP_RANK") && !present("NNODES")) return std::nullopt;
    const char* launcher = "a torchrun-style launcher";
    const char* node_name = present("NODE_RANK") ? "NODE_RANK" : "GROUP_RANK";
    if (!present(node_name))
        throw UsageError("mpify::DdpOptions::from_environment: NNODES is set but neither NODE_RANK nor "
                         "GROUP_RANK is; set this machine's index among the nodes");
    const int node = count(node_name, launcher);
    if (present("NODE_RANK") && present("GROUP_RANK") && count("GROUP_RANK", launcher) != node)
        throw UsageError(fmt::format("mpify::DdpOptions::from_environment: NODE_RANK={} and GROUP_RANK={} "
                                     "disagree; unset one",
                                     node, count("GROUP_RANK", launcher)));
    LaunchedPlace place =
        place_of_node(node, required("NNODES", node_name, "set the number of nodes"), node_name, "NNODES");
    set_master_address(place, launcher, "set it to the address of the node with index 0");
    place.port = port_from(launcher, torchrun_default_port);
    return place;
}

MPIFY_END_DETAIL_NAMESPACE
