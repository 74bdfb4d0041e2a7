#pragma once
// The environment a new process gets: this process's own, with some variables set.
#include <map>
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// This process's environment with `overrides` applied, as "NAME=value" entries.
std::vector<std::string> environment_with(const std::map<std::string, std::string>& overrides);

MPIFY_END_DETAIL_NAMESPACE
