// Which launcher does what a call or a launched process asks (launcher.hpp).
#include "spawn/launchers/each_launcher.hpp"

MPIFY_BEGIN_DETAIL_NAMESPACE

Placement resolve_placement(const Placement& placement, int remote_ranks) {
    switch (placement.launcher) {
        case Placement::Launcher::mpirun: return resolve_mpirun(placement);
        case Placement::Launcher::slurm: return resolve_slurm(placement, remote_ranks);
        case Placement::Launcher::this_machine:
        case Placement::Launcher::command: break;
    }
    return placement;
}

void forget_launcher_answers(const Placement& placement) noexcept {
    if (placement.launcher == Placement::Launcher::slurm) forget_slurm_answers(placement);
}

std::optional<LaunchedPlace> launched_place() {
    if (std::optional<LaunchedPlace> place = torchrun_place()) return place;
    if (std::optional<LaunchedPlace> place = mpirun_place()) return place;
    return slurm_place();
}

MPIFY_END_DETAIL_NAMESPACE
