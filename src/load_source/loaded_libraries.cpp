#include "load_source/loaded_libraries.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

struct LoadedSource {
    void* handle;
    std::string path;
};

std::mutex loaded_lock;
std::vector<LoadedSource> loaded;  // oldest first; guarded by loaded_lock
std::atomic<unsigned long> generation{0};

// True when `address`, found by dlsym in `library`, is a global function that `library`
// itself defines: dlsym on a handle also searches the libraries it depends on, and a
// weak definition (an inline function, a template instance) is one copy of many that
// the dynamic linker already chose between.
bool defined_here(const void* address, const std::string& library) {
    Dl_info info{};
    ElfW(Sym)* symbol = nullptr;  // dladdr1 fills a void*; the table it points into is read-only
    if (::dladdr1(address, &info, reinterpret_cast<void**>(&symbol), RTLD_DL_SYMENT) == 0 || symbol == nullptr)
        return false;
    return info.dli_fname != nullptr && library == info.dli_fname && ELF64_ST_TYPE(symbol->st_info) == STT_FUNC &&
           ELF64_ST_BIND(symbol->st_info) == STB_GLOBAL;
}

}  // namespace

void remember_loaded_source(void* handle, const std::string& path) {
    std::lock_guard lock(loaded_lock);
    for (const LoadedSource& source : loaded)
        if (source.handle == handle) return;
    loaded.push_back({handle, path});
    generation.fetch_add(1);
}

void* newest_source_function(const char* linker_name) noexcept {
    std::lock_guard lock(loaded_lock);
    for (auto source = loaded.rbegin(); source != loaded.rend(); ++source) {
        void* address = ::dlsym(source->handle, linker_name);
        if (address != nullptr && defined_here(address, source->path)) return address;
    }
    return nullptr;
}

unsigned long source_generation() noexcept { return generation.load(); }

MPIFY_END_DETAIL_NAMESPACE
