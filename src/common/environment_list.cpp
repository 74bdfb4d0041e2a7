#include "common/environment_list.hpp"

#include <cstring>

#include <mpify/abi.hpp>

extern char** environ;

MPIFY_BEGIN_DETAIL_NAMESPACE

std::vector<std::string> environment_with(const std::map<std::string, std::string>& overrides) {
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e) {
        const char* eq = std::strchr(*e, '=');
        const std::string name = eq ? std::string(*e, static_cast<std::size_t>(eq - *e)) : std::string(*e);
        if (overrides.count(name) == 0) env.emplace_back(*e);
    }
    for (const auto& [name, value] : overrides) env.push_back(name + "=" + value);
    return env;
}

MPIFY_END_DETAIL_NAMESPACE
