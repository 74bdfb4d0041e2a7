// Open MPI's mpirun: it starts each remote rank's agent on its host (`mpirun --host H -np
// 1`), and a program it started reads its place from OMPI_COMM_WORLD_RANK and _SIZE.
#include "spawn/launchers/each_launcher.hpp"
#include "spawn/launchers/launcher_variables.hpp"

MPIFY_BEGIN_DETAIL_NAMESPACE

Placement resolve_mpirun(const Placement& placement) {
    Placement resolved = placement;
    resolved.command = "mpirun --host %H -np 1 " + template_words(placement.launcher_options) + "%C";
    resolved.launcher = Placement::Launcher::command;
    return resolved;
}

std::optional<LaunchedPlace> mpirun_place() {
    if (!present("OMPI_COMM_WORLD_RANK")) return std::nullopt;
    const char* launcher = "Open MPI's mpirun";
    LaunchedPlace place =
        place_of_node(count("OMPI_COMM_WORLD_RANK", launcher),
                      required("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "is this mpirun broken?"),
                      "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    set_master_address(place, launcher,
                       "Open MPI does not say which host runs rank 0: pass it, e.g. mpirun -x MASTER_ADDR=<address "
                       "of rank 0's host>");
    place.port = port_from(launcher, torchrun_default_port);
    return place;
}

MPIFY_END_DETAIL_NAMESPACE
