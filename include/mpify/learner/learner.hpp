#pragma once
// A small fastai-style training layer over LibTorch's C++ frontend:
//
//   Learner learn(data, model, cross_entropy, {accuracy()});
//   History h = learn.fit_one_cycle(2, 3e-3);
//
// The same code trains in one process or in every rank of mpify::in_ddp: when a
// DdpGuard is active, the learner wraps the model in mpify::DistributedDataParallel,
// gives each rank its shard of the training set (a new shuffle each epoch), validates
// each rank on its share of the validation set, and adds up losses and metrics over
// all ranks, so the numbers are those of the whole data set.
#include <mpify/abi.hpp>
#include <mpify/learner/callbacks.hpp>
#include <mpify/learner/fit_position.hpp>
#include <mpify/learner/history.hpp>
#include <mpify/learner/lr_finder.hpp>
#include <mpify/learner/metrics.hpp>

#include <mpify/distributed_data_parallel.hpp>
#include <mpify/grad_scaler.hpp>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch::optim {
class AdamW;
}

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// Inputs and targets, one sample per row.
struct DataSet {
    at::Tensor inputs;   ///< (N, ...): the model's input, one sample per row
    at::Tensor targets;  ///< (N, ...): what the loss compares the output with
    /// N, the number of samples.
    std::int64_t size() const { return inputs.size(0); }
};

/// The training and validation sets and how to batch them.
struct DataLoaders {
    DataSet train;  ///< what fit trains on, shuffled each epoch
    DataSet valid;  ///< what each epoch's validation loss and metrics are measured on
    std::int64_t batch_size = 64;  ///< per rank
    std::uint64_t seed = 0;        ///< the training shuffle's seed
};

/// A model's answers for a whole data set, in the data set's order (Learner::get_preds).
struct Predictions {
    at::Tensor outputs;  ///< what the model's forward returns for each item, in eval mode (N, ...)
    at::Tensor targets;  ///< the data set's targets (N, ...)
    at::Tensor losses;   ///< the loss function on each item alone (N)
};

/// Loss of a batch: a scalar tensor, the mean over the batch.
using LossFunction = std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)>;

/// The arithmetic of forward passes, on the Learner's device (LearnerOptions::device).
/// Parameters, gradients, the optimizer and the all-reduce stay float32 in every mode.
enum class Precision {
    float32,   ///< everything in float32
    bfloat16,  ///< forward and loss under LibTorch's autocast to bfloat16 (convolutions and
               ///< matrix products in bfloat16); fastai's to_bf16
    float16,   ///< forward and loss under autocast to float16, and the loss scaled by a
               ///< mpify::GradScaler: steps whose gradients hold an inf or a NaN are skipped
               ///< and the scale backs off; its state is in the checkpoints (fastai's
               ///< to_fp16). On CUDA, or on the CPU with LibTorch 2.x (1.13's CPU autocast
               ///< has no float16: the constructor refuses it there)
};

/// How a Learner trains, beyond the model and data.
struct LearnerOptions {
    double weight_decay = 0.01;  ///< AdamW's decoupled weight decay
    /// Batches per epoch (training, and validation per rank), 0: all. Defaults to
    /// the environment variable MPIFY_LEARNER_MAX_BATCHES, which short test runs set.
    std::int64_t max_batches = max_batches_from_environment();
    /// Bucketing of the gradient all-reduce when training in a group.
    mpify::DdpModelOptions ddp;
    /// Where the automatic checkpoint lives (checkpoint.pt), empty: none. Rank 0 writes it
    /// when a fit starts (so a folder that cannot be written is an error before any
    /// training), after every epoch and every `checkpoint_every` batches; a fit started
    /// with one there goes on where it stopped (see Learner::fit).
    std::string checkpoint_dir;
    /// Also checkpoint every this many training batches within an epoch; 0: at epoch ends only.
    /// With `accumulate`, at the end of the accumulation group it falls in.
    std::int64_t checkpoint_every = 0;
    /// Gradient accumulation: the gradients of this many batches are summed (weighted by
    /// their sizes, so that they are those of one batch of all their samples) before one
    /// optimizer step; in a group, only the last batch's backward all-reduces (no_sync for
    /// the others). 1: a step every batch.
    std::int64_t accumulate = 1;
    /// Mixed precision: bfloat16 or float16 run training and validation forwards in that type
    /// where autocast does; what it gains or costs depends on the device (on a CPU without
    /// AVX-512, bfloat16 convolutions are slower than float32's).
    Precision precision = Precision::float32;
    /// The loss scaler's settings, for Precision::float16 (ignored otherwise); `enabled =
    /// false` trains float16 without scaling.
    mpify::GradScalerOptions scaler;
    /// Where the model trains; unset: inside a DdpGuard the rank's device
    /// (mpify::ddp::device(): its GPU under NCCL or with DdpOptions::gpus), outside one
    /// CUDA device 0 when LibTorch sees a GPU, else the CPU. The data sets stay where they
    /// are (the CPU, usually): each batch is copied to the device as it is used.
    std::optional<c10::Device> device;

    /// MPIFY_LEARNER_MAX_BATCHES as a number, 0 when unset; throws std::invalid_argument
    /// when it is set to anything but a non-negative integer.
    static std::int64_t max_batches_from_environment();
};

/// Any module with `at::Tensor forward(const at::Tensor&)`, behind one type, so the
/// Learner (and DistributedDataParallel inside it) need not be templates.
class AnyModel : public torch::nn::Module {
public:
    /// `model`, registered as this module's submodule "model", and its forward.
    AnyModel(std::shared_ptr<torch::nn::Module> model, std::function<at::Tensor(const at::Tensor&)> forward);
    /// The model's forward on `input`.
    at::Tensor forward(const at::Tensor& input) { return forward_(input); }

private:
    std::function<at::Tensor(const at::Tensor&)> forward_;
};

/// A model, its data, its loss and metrics; fit trains it with AdamW.
class Learner {
public:
    /// `model` is any torch::nn::Module with `at::Tensor forward(at::Tensor)`.
    template <class Model>
    Learner(DataLoaders data, std::shared_ptr<Model> model, LossFunction loss, std::vector<Metric> metrics = {},
            LearnerOptions options = {})
        : Learner(std::move(data), erase(model), std::move(loss), std::move(metrics), std::move(options)) {}
    /// The same, for a model already behind AnyModel.
    Learner(DataLoaders data, std::shared_ptr<AnyModel> model, LossFunction loss, std::vector<Metric> metrics,
            LearnerOptions options);
    /// Releases the model's DDP wrapper and the optimizer; the group (the DdpGuard) stays.
    ~Learner();
    Learner(const Learner&) = delete;
    Learner& operator=(const Learner&) = delete;

    /// Trains `epochs` epochs at a constant learning rate. With options().checkpoint_dir
    /// holding a checkpoint of the same fit (same schedule, epochs and rate), it goes on
    /// from there: the model, optimizer, schedule, sampler and RNG as they were, the
    /// History so far, at any world size (a different one re-shards the data and says
    /// so). A checkpoint of another fit is an error; one of a finished fit returns its
    /// History without training. Under DDP every rank calls it.
    History fit(int epochs, double lr);
    /// Trains `epochs` epochs with the 1cycle schedule peaking at `max_lr` (see
    /// one_cycle.hpp); resumes from a checkpoint as fit does.
    History fit_one_cycle(int epochs, double max_lr);
    /// The model's outputs for `inputs`, in eval mode, without gradients, in this process,
    /// on the CPU (the inputs may be anywhere: they are copied to the Learner's device).
    at::Tensor predict(const at::Tensor& inputs);
    /// Trains a few steps with a learning rate growing from options.start_lr to end_lr and
    /// records the loss of each (fastai's lr_find), then puts the model's weights back as
    /// they were (the optimizer of fit is not touched: the sweep has its own). Under DDP
    /// every rank calls it: each step trains on the global batch, its loss is the global
    /// batch's, so every rank records the same curve, stops at the same step and suggests
    /// the same rate. Throws std::invalid_argument for a sweep that cannot be run.
    LrFinderResult lr_find(LrFinderOptions options = {});
    /// Predictions for the whole validation set (fastai's get_preds), in eval mode, as CPU
    /// tensors. Under DDP every rank calls it: each predicts every world_size-th item, and
    /// every rank gets all of them back in the data set's order, each item once.
    Predictions get_preds();
    /// The same for `data`.
    Predictions get_preds(const DataSet& data);

    /// Writes a checkpoint to `path` (rank 0 only; other ranks do nothing): the model,
    /// the optimizer, the loss scaler (Precision::float16), where the last fit stands, the
    /// RNG and its History. Atomic: a crash leaves the previous file whole.
    void save(const std::string& path);
    /// Loads a checkpoint written by save or by the automatic checkpoints: the model, the
    /// optimizer and the History (history()); the next fit starts afresh from these
    /// weights. Under DDP every rank calls it and rank 0's file reaches every rank (no
    /// shared file system needed). Throws std::runtime_error naming the file and what does
    /// not match for a damaged, truncated or foreign file.
    void load(const std::string& path);
    /// Writes the model alone to `path` (rank 0 only), for load_model: parameters and
    /// buffers of the model itself, never of a DDP wrapper. (fastai's learn.export;
    /// `export` is a C++ keyword.)
    void export_model(const std::string& path) const;
    /// The History of the last fit, or of the checkpoint load read.
    const History& history() const { return history_; }

    /// Adds a callback; a ProgressPrinter is there from the start.
    void add_callback(std::shared_ptr<Callback> callback) { callbacks_.push_back(std::move(callback)); }

    /// This process's rank in the group it was made in (0 outside a DdpGuard).
    int rank() const { return rank_; }
    /// The group's size when it was made (1 outside a DdpGuard).
    int world_size() const { return world_size_; }
    /// The options it was made with.
    const LearnerOptions& options() const { return options_; }
    /// The metrics' names, in order (History::metric_names of its fits).
    std::vector<std::string> metric_names() const;
    /// The model being trained (the same on every rank after each step).
    torch::nn::Module& model() { return *model_; }
    /// The device the model trains on (see LearnerOptions::device).
    c10::Device device() const { return device_; }
    /// The loss scaler of the training steps: enabled with Precision::float16, else a
    /// disabled one (its scale is 1).
    const mpify::GradScaler& scaler() const { return scaler_; }

private:
    template <class Model>
    static std::shared_ptr<AnyModel> erase(const std::shared_ptr<Model>& model) {
        Model* raw = model.get();  // kept alive: AnyModel registers it as a submodule
        return std::make_shared<AnyModel>(model, [raw](const at::Tensor& x) { return raw->forward(x); });
    }
    /// Maps the fraction of training done to (lr, momentum).
    using Schedule = std::function<std::pair<double, double>(double)>;
    /// Both fits: `start` says which fit it is (schedule, epochs, lr) and where it begins.
    History run(FitPosition start, const Schedule& schedule);
    at::Tensor forward_train(const at::Tensor& inputs);
    /// `rows` of `data`'s inputs and targets, on the Learner's device.
    std::pair<at::Tensor, at::Tensor> batch_of(const DataSet& data, const at::Tensor& rows) const;
    /// The loss of `inputs` against `targets` in training mode, under the precision's
    /// autocast, in float32.
    at::Tensor training_loss(const at::Tensor& inputs, const at::Tensor& targets);
    /// options().scaler, enabled only for Precision::float16.
    mpify::GradScalerOptions scaler_options() const;
    /// Trains the `batches` batches of `order` in epoch `position.epoch`, of a fit of
    /// `total_steps` batches; in a resumed epoch they come after `position.batch` batches'
    /// worth (the schedule and the callbacks count on from there). Each loss goes to
    /// `history` and the callbacks. Returns the sum of the losses, `carried` (what a resumed
    /// epoch had) included.
    double train_epoch(const at::Tensor& order, FitPosition position, std::int64_t batches, double total_steps,
                       double carried, const Schedule& schedule, History& history);
    /// The checkpoint of options().checkpoint_dir, when there is one, read by rank 0 and
    /// sent to every rank; at `start` the fit resumes (`history` is what it had done);
    /// without one, rank 0 writes the first. False when the checkpoint's fit is done.
    bool resume_or_begin(FitPosition& start, History& history);
    /// Rank 0 writes a checkpoint at `path` of the fit at `position` (save, and the
    /// automatic ones at checkpoint_path()).
    void write_checkpoint(const std::string& path, const FitPosition& position, const History& history);
    std::string checkpoint_path() const;
    /// AdamW over the model's parameters, once: the first fit or load makes it.
    void make_optimizer();
    /// The model the user gave (inside AnyModel), whose names the files use.
    torch::nn::Module& user_model() const;
    /// Adds this rank's validation rows to `sums` (see run() for the layout).
    void add_validation(const at::Tensor& rows, std::vector<double>& sums);
    /// The epoch's record from the sums of every rank.
    EpochRecord record_of(int epoch, std::int64_t batches, const std::vector<double>& sums) const;

    DataLoaders data_;
    std::shared_ptr<AnyModel> model_;
    LossFunction loss_;
    std::vector<Metric> metrics_;
    LearnerOptions options_;
    std::vector<std::shared_ptr<Callback>> callbacks_;
    int rank_ = 0;
    int world_size_ = 1;
    c10::Device device_{c10::kCPU};
    mpify::GradScaler scaler_;
    std::unique_ptr<mpify::DistributedDataParallel<AnyModel>> ddp_model_;  ///< set inside a DdpGuard
    std::unique_ptr<torch::optim::AdamW> optimizer_;  ///< made at the first fit or load, kept after
    FitPosition position_;  ///< where the last fit stands (for save)
    History history_;       ///< the last fit's
};

/// Loads the model of `path` — an export_model file or a checkpoint — into `model`,
/// constructed as the one that was trained, and puts it in eval mode, ready to predict
/// (fastai's load_learner). Throws std::runtime_error naming the file and the first
/// parameter whose name or shape does not match.
void load_model(const std::string& path, torch::nn::Module& model);

}  // namespace learner
MPIFY_END_NAMESPACE
