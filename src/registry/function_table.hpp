#pragma once
// The process-wide tables behind MPIFY_REGISTER and MPIFY_REGISTER_CONTEXT (the
// registration side is include/mpify/registry.hpp): the caller looks a function up by
// address, a worker by name.
#include <mpify/registry.hpp>

#include <string>
#include <string_view>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct FunctionEntry {
    std::string name;
    const void* address = nullptr;
    Invoker invoke = nullptr;
    std::string signature;  ///< typeid(F*).name() of the registered function
};

struct ContextEntry {
    std::string type_key;
    std::string name;
    ContextRunner run = nullptr;
};

/// The registration of the function at `address`, if any (copied: the registry may change).
bool find_function_by_address(const void* address, FunctionEntry& out);
/// Every registration under `name` (normally one).
std::vector<FunctionEntry> find_functions_by_name(std::string_view name);
/// The context registered under `type_key`, if any.
bool find_context(std::string_view type_key, ContextEntry& out);

MPIFY_END_DETAIL_NAMESPACE
