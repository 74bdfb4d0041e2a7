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
#include "callbacks.hpp"
#include "history.hpp"
#include "metrics.hpp"

#include <mpify/distributed_data_parallel.hpp>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch::optim {
class AdamW;
}

namespace mpify_examples {

/// Inputs and targets, one sample per row.
struct DataSet {
    at::Tensor inputs;
    at::Tensor targets;
    std::int64_t size() const { return inputs.size(0); }
};

/// The training and validation sets and how to batch them.
struct DataLoaders {
    DataSet train;
    DataSet valid;
    std::int64_t batch_size = 64;  ///< per rank
    std::uint64_t seed = 0;        ///< the training shuffle's seed
};

/// Loss of a batch: a scalar tensor, the mean over the batch.
using LossFunction = std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)>;

/// How a Learner trains, beyond the model and data.
struct LearnerOptions {
    double weight_decay = 0.01;  ///< AdamW's decoupled weight decay
    /// Batches per epoch (training, and validation per rank), 0: all. Defaults to
    /// the environment variable MPIFY_EXAMPLES_MAX_BATCHES, which short test runs set.
    std::int64_t max_batches = max_batches_from_environment();
    /// Bucketing of the gradient all-reduce when training in a group.
    mpify::DdpModelOptions ddp;

    /// MPIFY_EXAMPLES_MAX_BATCHES as a number, 0 when unset; throws std::invalid_argument
    /// when it is set to anything but a non-negative integer.
    static std::int64_t max_batches_from_environment();
};

/// Any module with `at::Tensor forward(const at::Tensor&)`, behind one type, so the
/// Learner (and DistributedDataParallel inside it) need not be templates.
class AnyModel : public torch::nn::Module {
public:
    AnyModel(std::shared_ptr<torch::nn::Module> model, std::function<at::Tensor(const at::Tensor&)> forward);
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
    Learner(DataLoaders data, std::shared_ptr<AnyModel> model, LossFunction loss, std::vector<Metric> metrics,
            LearnerOptions options);
    ~Learner();
    Learner(const Learner&) = delete;
    Learner& operator=(const Learner&) = delete;

    /// Trains `epochs` epochs at a constant learning rate.
    History fit(int epochs, double lr);
    /// Trains `epochs` epochs with the 1cycle schedule peaking at `max_lr` (see one_cycle.hpp).
    History fit_one_cycle(int epochs, double max_lr);
    /// The model's outputs for `inputs`, in eval mode, without gradients, in this process.
    at::Tensor predict(const at::Tensor& inputs);

    /// Adds a callback; a ProgressPrinter is there from the start.
    void add_callback(std::shared_ptr<Callback> callback) { callbacks_.push_back(std::move(callback)); }

    int rank() const { return rank_; }
    int world_size() const { return world_size_; }
    const LearnerOptions& options() const { return options_; }
    std::vector<std::string> metric_names() const;
    /// The model being trained (the same on every rank after each step).
    torch::nn::Module& model() { return *model_; }

private:
    template <class Model>
    static std::shared_ptr<AnyModel> erase(const std::shared_ptr<Model>& model) {
        Model* raw = model.get();  // kept alive: AnyModel registers it as a submodule
        return std::make_shared<AnyModel>(model, [raw](const at::Tensor& x) { return raw->forward(x); });
    }
    /// Maps the fraction of training done to (lr, momentum).
    using Schedule = std::function<std::pair<double, double>(double)>;
    /// Both fits.
    History run(int epochs, const Schedule& schedule);
    at::Tensor forward_train(const at::Tensor& inputs);
    /// One epoch's `batches` training batches, in `order`, of a fit of `total_steps`
    /// batches; each loss goes to `history` and the callbacks. Returns their sum.
    double train_epoch(torch::optim::AdamW& optimizer, const at::Tensor& order, int epoch, std::int64_t batches,
                       double total_steps, const Schedule& schedule, History& history);
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
    std::unique_ptr<mpify::DistributedDataParallel<AnyModel>> ddp_model_;  ///< set inside a DdpGuard
};

}  // namespace mpify_examples
