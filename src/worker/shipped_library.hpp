#pragma once
// A remote rank's agent finding the call's library on its machine: at the path the caller
// knows it by when the bytes there are the same (a shared filesystem, or the same
// installation), else in this user's cache of shipped libraries (<cache>/shipped/<sha256>.so,
// a 0700 folder: common/private_cache.hpp), else by receiving the bytes from the caller
// into that cache, checked against the hash before they get their name. A copy is never
// half there: it is written unnamed (O_TMPFILE; where the filesystem cannot, under a
// temporary name removed on failure) and linked in once whole and checked.
#include "common/clock.hpp"
#include "contract/remote_link.hpp"

#include <cstdint>
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// The largest library an agent takes from a caller.
constexpr std::uint64_t most_shipped_library_bytes = std::uint64_t(4) << 30;

/// Answers `offer` (just received on `link`, blocking) with library_here, receiving the
/// bytes first when no copy is on this machine (each message within `patience`); returns
/// the path the worker loads. When it cannot, tells the caller why with refused and throws
/// std::runtime_error saying so with this host's name.
std::string answer_library_offer(int link, const LibraryOffer& offer, Clock::duration patience);

MPIFY_END_DETAIL_NAMESPACE
