// A library of plain functions linked with mpify::core only: mpify-worker serves it
// without loading LibTorch.
#include "loaded_objects.hpp"

#include <mpify/mpify.hpp>

#include <link.h>

#include <algorithm>

namespace core_only {

std::vector<std::string> loaded_object_names() {
    std::vector<std::string> names;
    ::dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* out) {
            const std::string path = info->dlpi_name ? info->dlpi_name : "";
            if (!path.empty()) static_cast<std::vector<std::string>*>(out)->push_back(path.substr(path.rfind('/') + 1));
            return 0;
        },
        &names);
    return names;
}

std::vector<std::string> torch_objects_among(const std::vector<std::string>& names) {
    std::vector<std::string> torch;
    for (const std::string& name : names)
        for (const char* prefix : {"libtorch", "libc10", "libmpify_torch", "libgloo"})
            if (name.rfind(prefix, 0) == 0) torch.push_back(name);
    return torch;
}

std::vector<std::string> objects_loaded_by_library_rank() { return loaded_object_names(); }

}  // namespace core_only

MPIFY_REGISTER(core_only::objects_loaded_by_library_rank);
