#include "common/demangle.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <typeinfo>

namespace mpify::detail {

std::string demangle(const char* mangled) {
    if (mangled == nullptr) return "unknown";
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> readable(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
    return status == 0 && readable ? std::string(readable.get()) : std::string(mangled);
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

}  // namespace mpify::detail
