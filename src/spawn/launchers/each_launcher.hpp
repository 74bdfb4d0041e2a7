#pragma once
// What each launcher's file gives launchers.cpp, which chooses among them.
#include "spawn/launchers/launcher.hpp"

MPIFY_BEGIN_DETAIL_NAMESPACE

// command.cpp: the extra options of the launcher, as words a template keeps (each %
// doubled) followed by a space; "" without any.
std::string template_words(const std::string& launcher_options);

// mpirun.cpp
Placement resolve_mpirun(const Placement& placement);
std::optional<LaunchedPlace> mpirun_place();

// slurm.cpp
Placement resolve_slurm(const Placement& placement, int remote_ranks);
void forget_slurm_answers(const Placement& placement) noexcept;
std::optional<LaunchedPlace> slurm_place();

// torchrun.cpp
std::optional<LaunchedPlace> torchrun_place();

MPIFY_END_DETAIL_NAMESPACE
