#include "worker/huge_page_collapse.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1's value, for older headers
#endif

MPIFY_BEGIN_DETAIL_NAMESPACE

std::size_t collapse_private_memory_into_huge_pages() noexcept {
    constexpr std::uintptr_t huge_page = std::uintptr_t{2} << 20;
    // Beyond this a mapping is a reservation rather than memory in use (a sanitizer's
    // shadow): walking it would cost more than forking it does.
    constexpr unsigned long largest = 4ul << 30;
    std::FILE* maps = std::fopen("/proc/self/maps", "re");
    if (maps == nullptr) return 0;
    std::size_t collapsed = 0;
    char line[4096];
    while (std::fgets(line, sizeof line, maps) != nullptr) {
        // "start-end perms offset device inode [path]": private, writable, no file's.
        unsigned long start = 0, end = 0, offset = 0, inode = 0;
        char perms[8] = {}, device[32] = {}, path[16] = {};
        const int fields =
            std::sscanf(line, "%lx-%lx %7s %lx %31s %lu %15s", &start, &end, perms, &offset, device, &inode, path);
        if (fields < 6 || std::strcmp(perms, "rw-p") != 0 || inode != 0 || end - start > largest) continue;
        if (fields == 7 && std::strcmp(path, "[heap]") != 0) continue;  // a stack, the vdso's data...
        const std::uintptr_t first = (start + huge_page - 1) & ~(huge_page - 1);
        const std::uintptr_t last = end & ~(huge_page - 1);
        if (last <= first) continue;
        if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_COLLAPSE) == 0) collapsed += last - first;
    }
    std::fclose(maps);
    return collapsed;
}

MPIFY_END_DETAIL_NAMESPACE
