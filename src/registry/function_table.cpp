#include "registry/function_table.hpp"

#include <algorithm>
#include <mutex>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// A list of registrations guarded by one lock: registrations arrive from static
// initializers, possibly while another thread looks names up (a library dlopen'ed
// during a ranch).
template <class Entry>
class Table {
public:
    template <class Same>
    void add_unless(Same same, Entry entry) {
        std::lock_guard lock(mutex_);
        if (std::none_of(entries_.begin(), entries_.end(), same)) entries_.push_back(std::move(entry));
    }
    template <class Match>
    void remove(Match match) {
        std::lock_guard lock(mutex_);
        entries_.erase(std::remove_if(entries_.begin(), entries_.end(), match), entries_.end());
    }
    template <class Match>
    std::vector<Entry> find(Match match) {
        std::lock_guard lock(mutex_);
        std::vector<Entry> found;
        std::copy_if(entries_.begin(), entries_.end(), std::back_inserter(found), match);
        return found;
    }

private:
    std::mutex mutex_;
    std::vector<Entry> entries_;
};

// Constructed on first use, so registrations from any static initializer find them ready.
Table<FunctionEntry>& functions() {
    static Table<FunctionEntry> table;
    return table;
}
Table<ContextEntry>& contexts() {
    static Table<ContextEntry> table;
    return table;
}

auto at_address(const void* address) {
    return [address](const FunctionEntry& e) { return e.address == address; };
}
auto with_key(std::string_view key) {
    return [key](const ContextEntry& e) { return e.type_key == key; };
}

template <class Entry, class Match>
bool find_one(Table<Entry>& table, Match match, Entry& out) {
    std::vector<Entry> found = table.find(match);
    if (found.empty()) return false;
    out = std::move(found.front());
    return true;
}

}  // namespace

// One function registered from two translation units is one registration.
void register_function(const char* name, const void* address, Invoker invoker, const char* signature) noexcept {
    functions().add_unless(at_address(address), {name, address, invoker, signature});
}

void unregister_function(const void* address) noexcept { functions().remove(at_address(address)); }

void register_context(const char* type_key, const char* name, ContextRunner runner) noexcept {
    contexts().add_unless(with_key(type_key), {type_key, name, runner});
}

void unregister_context(const char* type_key) noexcept { contexts().remove(with_key(type_key)); }

bool context_registered(const char* type_key) noexcept {
    ContextEntry ignored;
    return find_context(type_key, ignored);
}

bool find_function_by_address(const void* address, FunctionEntry& out) {
    return find_one(functions(), at_address(address), out);
}

std::vector<FunctionEntry> find_functions_by_name(std::string_view name) {
    return functions().find([name](const FunctionEntry& e) { return e.name == name; });
}

bool find_context(std::string_view type_key, ContextEntry& out) {
    return find_one(contexts(), with_key(type_key), out);
}

MPIFY_END_DETAIL_NAMESPACE
