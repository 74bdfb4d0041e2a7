#pragma once
// Learner runs the examples' tests make alone (called directly) and in a group (through
// in_ddp): the same function either way, since the Learner trains in whatever group is
// active. In a shared library, registered, as in_ddp's functions must be.
#include <mpify/learner/lr_finder.hpp>

#include <mpify/ddp_guard.hpp>
#include <mpify/mpify.hpp>
#include <mpify/tensor.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mpify_examples::testing {

/// get_preds of a linear classifier (seeded, untrained) on 25 points: outputs, losses, targets.
std::vector<at::Tensor> predictions_of_25();

/// A linear classifier (seeded) with `valid_items` validation points, fewer than the ranks
/// of a group may be: get_preds before training (outputs, losses), then fit(1, 0.05), whose
/// recorded valid_loss comes third and the mean of get_preds' losses after it fourth (the
/// two must agree: the same items, each once).
std::vector<at::Tensor> predict_and_fit_with_few_items(std::int64_t valid_items);

/// lr_find over blobs with `batch_size` a rank, the rates up to `end_lr`. In a group, every
/// rank checks that its weights came back and that it stopped where every other rank did
/// (else it throws).
mpify::learner::LrFinderResult find_lr(std::int64_t batch_size, double end_lr);

/// fit(2, 0.05) of a linear classifier on 200 blobs, batches of `batch_size` a rank in groups
/// of `accumulate`: the weight and bias after.
std::vector<at::Tensor> fit_accumulating(std::int64_t batch_size, std::int64_t accumulate);

/// fit(8, 0.05) of a linear classifier on blobs with EarlyStopping("accuracy", 0.01, 1):
/// the epochs it ran. In a group every rank checks that all stopped after the same epoch
/// (else it throws).
std::int64_t epochs_before_early_stop();

/// Epoch 2 of a fit(2, 0.05) of a line (50 samples, batches of 4 a rank), checkpointed
/// after every batch in `dir`: with `stop_batch` >= 0, stopped by a throw after training
/// batch `stop_batch` of epoch 2 (whose checkpoint is then not written); with -1, resumed
/// from the checkpoint there. Returns, over every rank, how many times each sample was
/// trained in the batches of epoch 2 that the last checkpoint holds (stopped) or that
/// this run trained (resumed), and {sum of those batches' losses, their number, and,
/// resumed, the epoch's recorded train_loss}.
std::vector<at::Tensor> epoch_2_in_parts(std::string dir, std::int64_t stop_batch);

/// A checkpoint as every rank of the group gets it to load: rank 0 opens `path`, the
/// other ranks `their_path` (the same file, or as if their machine held another file or
/// none). Returns {the ranks whose bytes equal `path`'s, the collective calls rank 0 made
/// to get them there}.
std::vector<std::int64_t> checkpoint_on_every_rank(std::string path, std::string their_path);

}  // namespace mpify_examples::testing
