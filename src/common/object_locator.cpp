#include "common/object_locator.hpp"

#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdint>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
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

// "libfoo" of ".../libfoo.so.1.2": what a library's file and its soname's link share.
std::string stem(const std::string& path) {
    const std::string name = path.substr(path.rfind('/') + 1);
    return name.substr(0, name.find(".so"));
}

struct FileSearch {
    std::string path;
    std::string stem;
    struct stat file{};
    bool found = false;
};

int visit_for_file(dl_phdr_info* info, size_t /*size*/, void* data) {
    auto* search = static_cast<FileSearch*>(data);
    const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
    if (name.empty() || stem(name) != search->stem) return 0;
    struct stat loaded{};
    search->found = name == search->path ||
                    (::stat(name.c_str(), &loaded) == 0 && loaded.st_dev == search->file.st_dev &&
                     loaded.st_ino == search->file.st_ino);
    return search->found ? 1 : 0;
}

}  // namespace

bool is_loaded(const std::string& path) {
    FileSearch search;
    search.path = path;
    search.stem = stem(path);
    if (search.stem.empty() || ::stat(path.c_str(), &search.file) != 0) return false;
    dl_iterate_phdr(&visit_for_file, &search);
    return search.found;
}

ObjectLocation locate_object(const void* address) {
    Search search;
    search.address = reinterpret_cast<std::uintptr_t>(address);
    dl_iterate_phdr(&visit, &search);
    if (search.result.found) search.result.path = absolute(search.result.path);
    return search.result;
}

std::string libmpify_path() { return locate_object(reinterpret_cast<const void*>(&libmpify_path)).path; }

MPIFY_END_DETAIL_NAMESPACE
