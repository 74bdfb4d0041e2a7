#pragma once
// Which loaded ELF object (the program, or a shared library) holds an address.
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct ObjectLocation {
    bool found = false;            ///< false: in no loaded object (e.g. an interpreter's JIT memory)
    bool is_main_program = false;  ///< the executable itself
    std::string path;              ///< absolute path of the object
};

ObjectLocation locate_object(const void* address);

/// Whether the file at `path` is loaded in this process already (under that name or any
/// other, e.g. its soname's link). A false "no" is allowed, never a false "yes": names
/// whose file part differs from `path`'s before ".so" are not looked at.
bool is_loaded(const std::string& path);

/// Absolute path of the shared object that holds libmpify's own code.
std::string libmpify_path();

MPIFY_END_DETAIL_NAMESPACE
