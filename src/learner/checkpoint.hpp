#pragma once
// What a Learner's checkpoint holds and how it is laid out in one LibTorch archive: a
// header (what file this is, its format version), the model's parameters and buffers
// with their names and shapes, the optimizer's state, where the fit stands, the RNG, and
// the History so far. Loading checks the header and the model's shapes before touching
// anything, so a foreign or damaged file is an error naming the file, never a crash or a
// silent start from scratch.
#include "learner/checkpoint_file.hpp"

#include <mpify/learner/fit_position.hpp>
#include <mpify/learner/history.hpp>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <optional>
#include <string>

namespace torch::optim {
class Optimizer;
}

MPIFY_BEGIN_NAMESPACE
class GradScaler;

namespace learner {

/// The format version this build writes and reads (3: the position of a mid-epoch
/// checkpoint in samples, for an epoch resumed at another world size; 2, counted in
/// batches, and 1, without a checksum frame, are still read).
constexpr std::int64_t checkpoint_format = 3;

/// A checkpoint's bytes: `model` (the user's module, not a DDP wrapper), the optimizer
/// and the loss scaler when there are (a disabled scaler is not written), `position`,
/// this process's RNG state and `history`.
std::string checkpoint_bytes(const torch::nn::Module& model, const torch::optim::Optimizer* optimizer,
                             const GradScaler* scaler, const FitPosition& position, const History& history);

/// Replaces `path` atomically with the checkpoint checkpoint_bytes describes, written as
/// it is serialized (its bytes never all in memory). Throws what
/// write_framed_file_atomically throws.
void write_checkpoint_file(const std::string& path, const torch::nn::Module& model,
                           const torch::optim::Optimizer* optimizer, const GradScaler* scaler,
                           const FitPosition& position, const History& history);

/// Replaces `path` atomically with an export: the model alone, for load_model.
void write_export_file(const std::string& path, const torch::nn::Module& model);

/// What load_checkpoint found besides the model, which it loaded.
struct LoadedCheckpoint {
    FitPosition position;
    History history;
    bool has_optimizer = false;
};

/// Reads the checkpoint `bytes`: checks its frame, its header and
/// the model's names and shapes, then loads the model, the optimizer and the scaler (each
/// when given and saved; an enabled scaler the file has none for starts afresh), and the
/// RNG state. Tensors go to the device of the model's first one (the optimizer's state
/// must be where its parameters are). Throws std::runtime_error naming `path` and what
/// does not match. `batch_size` (the Learner's) counts the samples a format 1 or 2 file
/// had done.
LoadedCheckpoint load_checkpoint(const CheckpointBytes& bytes, torch::nn::Module& model,
                                 torch::optim::Optimizer* optimizer, GradScaler* scaler, std::int64_t batch_size);

/// Loads the model of an export (or a checkpoint) in `bytes` into `model`; the same checks.
void load_model_bytes(const CheckpointBytes& bytes, torch::nn::Module& model);

}  // namespace learner
MPIFY_END_NAMESPACE
