#pragma once
// This process's environment changed for a while: the caller's rank sees its rank's
// variables while fn runs, a group sees its launcher's variables while it forms.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

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

MPIFY_END_DETAIL_NAMESPACE
