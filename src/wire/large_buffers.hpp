#pragma once
// Large buffers and page faults: first touching fresh memory costs a page fault per 4 KiB
// page, so a fresh buffer of tens of MiB costs more than what is copied into it.
// Transparent huge pages take 512 times fewer faults (benchmarks/README.md, "Spawning a
// call").
#include <cstddef>
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Asks the kernel to back [data, data + size) with transparent huge pages.
void advise_huge_pages(void* data, std::size_t size) noexcept;

/// Reserves `capacity` in `buffer`, backed by huge pages when it is large: first
/// touching fresh memory is the main cost of shipping large arguments.
void reserve_large(std::string& buffer, std::size_t capacity);

MPIFY_END_DETAIL_NAMESPACE
