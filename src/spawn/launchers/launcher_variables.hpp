#pragma once
// Reading a launcher's variables, for the launchers' places (launcher.hpp): every error a
// UsageError that names the variable, its value and the launcher that set it.
#include "spawn/launchers/launcher.hpp"

#include <optional>
#include <string>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// torchrun's port for the store when MASTER_PORT is not set.
constexpr int torchrun_default_port = 29500;

/// The variable's value; nullopt when it is unset or empty.
std::optional<std::string> variable(const char* name);
bool present(const char* name);

/// The variable (set) as a whole number from 0 to `largest`.
long long number(const char* name, const char* launcher, long long largest);
/// The variable (set) as a count from 0 to a million.
int count(const char* name, const char* launcher);
/// The variable `name` as a count; an error saying that `because` is set but it is not,
/// and `what_to_do`, when it is unset.
int required(const char* name, const char* because, const char* what_to_do);

/// MASTER_PORT, or `fallback` when it is unset.
int port_from(const char* launcher, int fallback);
/// MASTER_ADDR, which a group of several nodes needs under `launcher`; `how` says how to
/// set it.
std::string master_required(const char* launcher, const char* how);

/// The place of node `node` of `nodes` (read from the variables named), checked.
LaunchedPlace place_of_node(int node, int nodes, const char* node_name, const char* nodes_name);

/// MASTER_ADDR under `launcher`: needed (`how` says how to set it) when the place has
/// several nodes, else as set, if set.
void set_master_address(LaunchedPlace& place, const char* launcher, const char* how);

MPIFY_END_DETAIL_NAMESPACE
