#pragma once
// Environment handling: the workers' environment, and the caller's own, changed for
// the duration of its rank and restored afterwards.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mpify::detail {

/// The caller's environment with `overrides` applied, as "NAME=value" entries.
std::vector<std::string> environment_with(const std::map<std::string, std::string>& overrides);

/// Sets variables in this process and puts the previous values (or absence) back on
/// destruction.
class ScopedEnvironment {
public:
    explicit ScopedEnvironment(const std::map<std::string, std::string>& values);
    ~ScopedEnvironment();
    ScopedEnvironment(const ScopedEnvironment&) = delete;
    ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

private:
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace mpify::detail
