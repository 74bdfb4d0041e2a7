#pragma once
// A checkpoint read by every rank of a Learner's group, each with the file open rather
// than a copy in memory where it can: a load then holds little more than the tensors it
// reads.
#include "learner/checkpoint_file.hpp"

#include <optional>
#include <string>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// The checkpoint at `path` for rank `rank` of a Learner's ranks (`in_group`: they train
/// in a DDP group, and every rank needs the bytes). Rank 0 opens the file and checks its
/// frame; every other rank opens the same path and reads its own file when it holds the
/// same bytes (the same size and checksum: one machine, or a shared file system); rank 0
/// sends the file to the ranks that do not. nullopt on every rank when `missing_is_none`
/// and rank 0 finds no file. Throws std::runtime_error: on rank 0 naming the file and
/// what is wrong, on the others saying that rank 0 could not read it.
std::optional<CheckpointBytes> open_on_every_rank(const std::string& path, bool missing_is_none, int rank,
                                                  bool in_group);

}  // namespace learner
MPIFY_END_NAMESPACE
