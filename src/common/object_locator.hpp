#pragma once
// Which loaded ELF object (the program, or a shared library) holds an address.
#include <string>

namespace mpify::detail {

struct ObjectLocation {
    bool found = false;            ///< false: in no loaded object (e.g. an interpreter's JIT memory)
    bool is_main_program = false;  ///< the executable itself
    std::string path;              ///< absolute path of the object
};

ObjectLocation locate_object(const void* address);

/// Absolute path of the shared object that holds libmpify's own code.
std::string libmpify_path();

}  // namespace mpify::detail
