// DdpOptions::from_environment: a machine's place in a group across machines, as the
// launcher that started it set it (launchers/launcher.hpp reads each launcher's names).
#include "spawn/launchers/launcher.hpp"

#include <mpify/ddp_guard.hpp>

MPIFY_BEGIN_NAMESPACE

DdpOptions DdpOptions::from_environment() {
    DdpOptions o;
    const std::optional<detail::LaunchedPlace> place = detail::launched_place();
    if (!place) return o;  // no launcher: one machine
    o.node_rank = place->node_rank;
    o.nodes = place->nodes;
    if (place->addr) o.addr = *place->addr;
    o.port = place->port;
    return o;
}

MPIFY_END_NAMESPACE
