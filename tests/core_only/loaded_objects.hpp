#pragma once
// What a process has loaded, for the tests of a program linked with mpify::core only.
#include <string>
#include <vector>

namespace core_only {

/// File names (without folders) of every shared object loaded in this process.
std::vector<std::string> loaded_object_names();

/// Those of LibTorch's libraries and libmpify_torch among `names`.
std::vector<std::string> torch_objects_among(const std::vector<std::string>& names);

/// loaded_object_names() of the rank that runs it, registered in the library: a worker
/// of mpify-worker serves it.
std::vector<std::string> objects_loaded_by_library_rank();

}  // namespace core_only
