#pragma once
// What a rank holds while it runs its function, beyond what the core knows of: as it
// loads, libmpify_torch installs a TensorMemoryCache here, so that the caller's rank and
// every worker run a training step without faulting its temporaries in afresh. (Without
// it, the caller's rank, first thing in a fresh process, trained a small CNN at a
// fraction of a worker's speed, faulting thousands of pages a step: benchmarks/README.md,
// "The caller's own rank".)
#include <mpify/abi.hpp>
#include <mpify/export.hpp>

#include <memory>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// A rank's memory scope: it ends when the last copy is destroyed; empty when nothing is
/// installed (or the user turned it off).
using RankMemoryScope = std::shared_ptr<void>;

/// Opens a scope for a rank about to run its function.
using RankMemoryOpener = RankMemoryScope (*)();

/// Installs `open` as what every rank of this process opens (libmpify_torch's, as it
/// loads); nullptr uninstalls it (as it unloads).
MPIFY_API void install_rank_memory(RankMemoryOpener open) noexcept;

/// The installed opener's scope, or an empty one.
RankMemoryScope open_rank_memory();

MPIFY_END_DETAIL_NAMESPACE
