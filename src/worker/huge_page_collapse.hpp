#pragma once
// A template's private memory as transparent huge pages, so that forking it is cheap.
//
// A fork copies the page-table entries of the parent's private anonymous memory, and the
// child's exit takes them apart again: a template that has loaded LibTorch 2.x holds about
// 180 MiB of it (its heap and arenas), tens of thousands of entries each way, most of a
// worker's start and end. Collapsed into 2 MiB pages (MADV_COLLAPSE, Linux 6.1 and later),
// that memory is one entry per 2 MiB. A worker that writes to such a page splits it into
// small pages in its own tables and copies only the 4 KiB it wrote, as it would have.
#include <cstddef>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Collapses every 2 MiB-aligned stretch of this process's private anonymous writable
/// memory (the heap, anonymous mappings up to 4 GiB) into huge pages where the kernel can;
/// does nothing where it cannot (an older kernel, huge pages turned off, no memory to
/// spare). Returns the bytes collapsed.
std::size_t collapse_private_memory_into_huge_pages() noexcept;

MPIFY_END_DETAIL_NAMESPACE
