#pragma once
// The caller's side of a library's journey to another machine: the call's function lives
// in a shared object (a load_source library, a library of the program's); the rank's
// agent is told its path, size and content hash, and answers where the same bytes are on
// its machine, or asks for them (contract/remote_link.hpp; the agent's side is
// worker/shipped_library.hpp).
#include "common/clock.hpp"
#include "contract/remote_link.hpp"

#include <cstdint>
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// The offer for the library at `path`: its size and SHA-256, hashed once per version of
/// the file in this process (known by device, inode, size and modification time). Throws
/// std::system_error naming the file when it cannot be read.
LibraryOffer offer_library(const std::string& path);

/// Where a library ended up on a rank's machine.
struct LibraryDelivery {
    LibraryHere here;
    std::uint64_t bytes_sent = 0;  ///< 0 unless it was shipped
};

/// Offers `offer` to the agent at the other end of `link` (blocking, not yet handed to a
/// stand-in) and sends the library's bytes if it asks for them, by `deadline`. Throws
/// std::runtime_error saying why when the agent refuses (its words) or the link fails.
LibraryDelivery deliver_library(int link, const LibraryOffer& offer, Clock::time_point deadline);

MPIFY_END_DETAIL_NAMESPACE
