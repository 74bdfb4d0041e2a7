#pragma once
// Values read in place. A worker's large arguments arrive as a private, copy-on-write
// mapping of the caller's memfd (wire/shared_arguments.hpp); a value whose type
// can live on memory it does not own (a tensor) takes its bytes from there instead of
// copying them: the mapping stays alive as long as such a value does, and a rank that
// writes into it gets its own copy of the pages it writes, as a copy would have.
//
// The blob being read is the innermost ReadingBlob of the thread (from_blob makes one);
// the memory values may keep is the InPlaceRegion of the thread (the worker makes one
// around its call). Anywhere else (the caller's own rank, a result, small arguments
// that came through the channel) take_in_place finds nothing and values copy.
#include <mpify/abi.hpp>
#include <mpify/export.hpp>

#include <cstddef>
#include <memory>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// While it exists, values read on this thread from [begin, begin + size) may keep
/// pointing into it; `owner` is what keeps that memory alive.
class InPlaceRegion {
public:
    InPlaceRegion(const char* begin, std::size_t size, std::shared_ptr<const void> owner);
    ~InPlaceRegion();
    InPlaceRegion(const InPlaceRegion&) = delete;
    InPlaceRegion& operator=(const InPlaceRegion&) = delete;

    const char* begin;
    std::size_t size;
    std::shared_ptr<const void> owner;

private:
    InPlaceRegion* outer_;
};

/// Bytes a loader takes in place, and what keeps them alive.
struct InPlaceBytes {
    const char* data = nullptr;
    std::shared_ptr<const void> owner;
};

/// The next `size` bytes of the blob this thread reads, read in place, when they lie in
/// this thread's InPlaceRegion and start at a multiple of `alignment`; otherwise
/// data == nullptr and nothing is read (the loader copies, as without a region).
MPIFY_API InPlaceBytes take_in_place(std::size_t size, std::size_t alignment) noexcept;

MPIFY_END_DETAIL_NAMESPACE
