#include "registry.hpp"

#include <algorithm>
#include <mutex>

namespace mpify::detail {
namespace {

// Registrations arrive from static initializers, possibly while another thread looks
// names up (a library dlopen'ed during a ranch), hence the lock.
struct Registry {
    std::mutex mutex;
    std::vector<FunctionEntry> functions;
    std::vector<ContextEntry> contexts;
};

// Constructed on first use, so registrations from any static initializer find it ready.
Registry& registry() {
    static Registry instance;
    return instance;
}

}  // namespace

void register_function(const char* name, const void* address, Invoker invoker) noexcept {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    // One function registered from two translation units is one registration.
    const bool known = std::any_of(r.functions.begin(), r.functions.end(),
                                   [&](const FunctionEntry& e) { return e.address == address; });
    if (!known) r.functions.push_back({name, address, invoker});
}

void unregister_function(const void* address) noexcept {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    r.functions.erase(std::remove_if(r.functions.begin(), r.functions.end(),
                                     [&](const FunctionEntry& e) { return e.address == address; }),
                      r.functions.end());
}

void register_context(const char* type_key, const char* name, ContextRunner runner) noexcept {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    const bool known = std::any_of(r.contexts.begin(), r.contexts.end(),
                                   [&](const ContextEntry& e) { return e.type_key == type_key; });
    if (!known) r.contexts.push_back({type_key, name, runner});
}

void unregister_context(const char* type_key) noexcept {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    r.contexts.erase(std::remove_if(r.contexts.begin(), r.contexts.end(),
                                    [&](const ContextEntry& e) { return e.type_key == type_key; }),
                     r.contexts.end());
}

bool context_registered(const char* type_key) noexcept {
    ContextEntry ignored;
    return find_context(type_key, ignored);
}

bool find_function_by_address(const void* address, FunctionEntry& out) {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    for (const FunctionEntry& e : r.functions) {
        if (e.address == address) {
            out = e;
            return true;
        }
    }
    return false;
}

std::vector<FunctionEntry> find_functions_by_name(std::string_view name) {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    std::vector<FunctionEntry> found;
    for (const FunctionEntry& e : r.functions)
        if (e.name == name) found.push_back(e);
    return found;
}

bool find_context(std::string_view type_key, ContextEntry& out) {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    for (const ContextEntry& e : r.contexts) {
        if (e.type_key == type_key) {
            out = e;
            return true;
        }
    }
    return false;
}

}  // namespace mpify::detail
