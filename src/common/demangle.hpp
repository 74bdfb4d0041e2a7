#pragma once
// Readable C++ type names for error messages.
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// "std::runtime_error" from a mangled name; the input itself if it cannot be demangled.
std::string demangle(const char* mangled);

/// Demangled type of the exception being handled (valid inside a catch block),
/// e.g. "int" for `throw 42`.
std::string current_exception_type();

/// what() of the exception being handled if it is a std::exception, else "".
std::string current_exception_message();

MPIFY_END_DETAIL_NAMESPACE
