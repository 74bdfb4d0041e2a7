#include "wire/large_buffers.hpp"

#include <sys/mman.h>

#include <cstdint>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

void advise_huge_pages(void* data, std::size_t size) noexcept {
    constexpr std::uintptr_t huge = 2u << 20;
    if (size < 2 * huge) return;
    const auto begin = reinterpret_cast<std::uintptr_t>(data);
    const std::uintptr_t first = (begin + huge - 1) & ~(huge - 1);
    const std::uintptr_t last = (begin + size) & ~(huge - 1);
    // Advice only: where THP is off or the range is not mmap'ed, nothing changes.
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

void reserve_large(std::string& buffer, std::size_t capacity) {
    if (capacity <= buffer.capacity()) return;
    buffer.reserve(capacity);
    advise_huge_pages(buffer.data(), buffer.capacity());
}

MPIFY_END_DETAIL_NAMESPACE
