#include "common/demangle.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <typeinfo>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

namespace {

// "mpify::v0_1::Interrupted" is mpify::Interrupted to its users: the versioned inline
// namespace (mpify/abi.hpp) is for the linker, not for messages.
std::string without_abi_namespace(std::string name) {
    const std::string versioned = "mpify::" MPIFY_ABI_NAMESPACE_STRING "::";
    for (auto at = name.find(versioned); at != std::string::npos; at = name.find(versioned, at))
        name.replace(at, versioned.size(), "mpify::");
    return name;
}

}  // namespace

std::string demangle(const char* mangled) {
    if (mangled == nullptr) return "unknown";
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> readable(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
    return status == 0 && readable ? without_abi_namespace(readable.get()) : std::string(mangled);
}

std::string current_exception_type() {
    // For a std::exception the dynamic type is the informative one (not "std::exception").
    try {
        throw;
    } catch (const std::exception& e) {
        return demangle(typeid(e).name());
    } catch (...) {
        const std::type_info* type = abi::__cxa_current_exception_type();
        return type ? demangle(type->name()) : "unknown exception";
    }
}

std::string current_exception_message() {
    try {
        throw;
    } catch (const std::exception& e) {
        return e.what();
    } catch (...) {
        return {};
    }
}

MPIFY_END_DETAIL_NAMESPACE
