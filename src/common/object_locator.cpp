#include "common/object_locator.hpp"

#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdlib.h>

#include <cstdint>

namespace mpify::detail {
namespace {

struct Search {
    std::uintptr_t address = 0;
    bool first = true;  // dl_iterate_phdr reports the main program first
    ObjectLocation result;
};

int visit(dl_phdr_info* info, size_t /*size*/, void* data) {
    auto* search = static_cast<Search*>(data);
    const bool is_main = search->first;
    search->first = false;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& segment = info->dlpi_phdr[i];
        if (segment.p_type != PT_LOAD) continue;
        const std::uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
        if (search->address >= begin && search->address < begin + segment.p_memsz) {
            search->result.found = true;
            search->result.is_main_program = is_main;
            search->result.path = is_main ? "/proc/self/exe" : info->dlpi_name;
            return 1;  // stop iterating
        }
    }
    return 0;
}

std::string absolute(const std::string& path) {
    char resolved[PATH_MAX];
    return ::realpath(path.c_str(), resolved) ? std::string(resolved) : path;
}

}  // namespace

ObjectLocation locate_object(const void* address) {
    Search search;
    search.address = reinterpret_cast<std::uintptr_t>(address);
    dl_iterate_phdr(&visit, &search);
    if (search.result.found) search.result.path = absolute(search.result.path);
    return search.result;
}

std::string libmpify_path() {
    return locate_object(reinterpret_cast<const void*>(&libmpify_path)).path;
}

}  // namespace mpify::detail
