#pragma once
// The environment a new process gets: this process's own, with some variables set.
#include <map>
#include <string>
#include <vector>

namespace mpify::detail {

/// This process's environment with `overrides` applied, as "NAME=value" entries.
std::vector<std::string> environment_with(const std::map<std::string, std::string>& overrides);

}  // namespace mpify::detail
