#include <mpify/learner/learner.hpp>

#include "learner/checkpoint_file.hpp"
#include "learner/checkpoint_on_ranks.hpp"
#include "learner/rank_rows.hpp"
#include <mpify/learner/one_cycle.hpp>

#include <mpify/learner/progress_bar.hpp>

#include <mpify/ddp.hpp>
#include <mpify/distributed_sampler.hpp>
#include <mpify/process.hpp>

#include <ATen/autocast_mode.h>
#include "compat/torch_compat.hpp"  // mpify's own, for the two LibTorch generations
#include <torch/torch.h>

#include <malloc.h>

#include <algorithm>
#include <limits>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

MPIFY_BEGIN_NAMESPACE
namespace learner {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Sets every parameter group's learning rate and Adam's beta1.
void apply(torch::optim::AdamW& optimizer, double lr, double momentum) {
    for (auto& group : optimizer.param_groups()) {
        auto& options = static_cast<torch::optim::AdamWOptions&>(group.options());
        options.lr(lr);
        options.betas({momentum, std::get<1>(options.betas())});
    }
}

// LibTorch allocates tens of MB of temporaries per batch (a convolution's unfolded
// input, for one), which glibc maps fresh and unmaps again each time, and first touch
// of a fresh 4 KiB page costs a page fault: that was most of the training time
// (benchmarks/README.md, "The caller's own rank"). Served from the heap and never given
// back, every batch reuses the memory of the batch before. Process-wide, and harmless to
// set more than once.
void keep_freed_memory() {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

// While it lives, the operations autocast covers on `device` run in the precision's type
// (nothing changes for float32): the C++ counterpart of Python's torch.autocast(device, dtype).
class Autocast {
public:
    Autocast(Precision precision, c10::DeviceType device)
        : device_(device), on_(precision != Precision::float32), was_enabled_(mpify::detail::autocast_enabled(device)),
          was_type_(mpify::detail::autocast_dtype(device)) {
        if (!on_) return;
        mpify::detail::set_autocast(device, true, precision == Precision::float16 ? at::kHalf : at::kBFloat16);
        at::autocast::increment_nesting();
    }
    ~Autocast() {
        if (!on_) return;
        if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
        mpify::detail::set_autocast(device_, was_enabled_, was_type_);
    }
    Autocast(const Autocast&) = delete;
    Autocast& operator=(const Autocast&) = delete;

private:
    c10::DeviceType device_;
    bool on_;
    bool was_enabled_;
    at::ScalarType was_type_;
};

// Whether this CPU has what oneDNN's bfloat16 kernels need to be fast (AVX-512 with its
// byte/word, vector-length and double/quad extensions). Without it, LibTorch 1.13 runs
// bfloat16 convolutions several times slower than float32 (benchmarks/README.md,
// "Compression hooks and bfloat16").
bool fast_bfloat16_cpu() {
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    return true;  // not x86: no known trap to warn of
#endif
}

// The device a Learner of `options` trains on (see LearnerOptions::device).
c10::Device learner_device(const LearnerOptions& options) {
    if (options.device) return *options.device;
    if (mpify::ddp::active()) return mpify::ddp::device();
    return torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
}

// The device to train on, checked: one this process can train on with `precision`, or
// std::invalid_argument saying what would work. "cuda" without a number is GPU 0.
c10::Device checked_device(c10::Device device, Precision precision) {
    if (!device.is_cuda() && !device.is_cpu())
        throw std::invalid_argument("Learner: LearnerOptions::device is " + device.str() +
                                    "; the Learner trains on the CPU or on CUDA");
    if (device.is_cuda()) {
        const auto visible = static_cast<c10::DeviceIndex>(torch::cuda::device_count());
        if (!device.has_index()) device = c10::Device(c10::kCUDA, 0);
        if (device.index() >= visible) {
            const char* shown = std::getenv("CUDA_VISIBLE_DEVICES");
            std::string seen = visible == 0 ? std::string("no GPU (") +
                                                  (at::hasCUDA() ? "CUDA finds none" : "its LibTorch has no CUDA")
                                            : std::to_string(visible) + " GPU(s) (numbered from 0";
            if (shown != nullptr) seen += std::string(", CUDA_VISIBLE_DEVICES='") + shown + "'";
            throw std::invalid_argument("Learner: LearnerOptions::device is " + device.str() +
                                        ", but this process sees " + seen + "): choose a device it sees, or the CPU");
        }
    }
    if (precision == Precision::float16 && device.is_cpu() && !MPIFY_CPU_AUTOCAST_HAS_FLOAT16)
        throw std::invalid_argument("Learner: precision = float16 on the CPU needs LibTorch 2.x (this one's CPU "
                                    "autocast has bfloat16 only): choose Precision::bfloat16, or train on a GPU");
    return device;
}

// What an epoch trains: its shard, or, for the epoch a checkpoint stopped in, the samples
// its first part did not train, sharded anew (the world size may have changed).
struct EpochPart {
    at::Tensor order;      ///< this rank's samples, in the order to train them
    std::int64_t batches;  ///< how many batches they make
};

// Sets `position` (a copy of the fit's start) to the beginning of what epoch `epoch` trains,
// of `batches` batches when whole: at its first batch, or after the first part of a resumed
// epoch, whose batches done (in this world size's batches), samples and losses it keeps.
EpochPart part_to_train(FitPosition& position, int epoch, const mpify::DistributedSampler& sampler,
                        std::int64_t batches, std::int64_t batch_size, int world_size) {
    if (epoch != position.epoch || position.samples_done == 0) {
        position.batch = position.samples_done = position.partial_batches = 0;
        position.partial_loss_sum = 0;
    }
    position.epoch = epoch;
    EpochPart part{torch::tensor(sampler.indices_after(position.samples_done), torch::kLong), batches};
    if (position.samples_done > 0) {
        position.batch = std::min(batches, position.samples_done / (batch_size * world_size));
        part.batches = std::min(ceil_div(part.order.size(0), batch_size), batches - position.batch);
    }
    return part;
}

}  // namespace

std::int64_t LearnerOptions::max_batches_from_environment() {
    const char* text = std::getenv("MPIFY_LEARNER_MAX_BATCHES");
    if (text == nullptr || *text == '\0') return 0;
    char* end = nullptr;
    const long long value = std::strtoll(text, &end, 10);
    if (*end != '\0' || value < 0)
        throw std::invalid_argument(std::string("MPIFY_LEARNER_MAX_BATCHES must be a non-negative integer, not \"") +
                                    text + "\"");
    return value;
}

AnyModel::AnyModel(std::shared_ptr<torch::nn::Module> model, std::function<at::Tensor(const at::Tensor&)> forward)
    : forward_(std::move(forward)) {
    register_module("model", std::move(model));
}

Learner::Learner(DataLoaders data, std::shared_ptr<AnyModel> model, LossFunction loss, std::vector<Metric> metrics,
                 LearnerOptions options)
    : data_(std::move(data)), model_(std::move(model)), loss_(std::move(loss)), metrics_(std::move(metrics)),
      options_(std::move(options)) {
    if (data_.batch_size < 1) throw std::invalid_argument("Learner: batch_size must be at least 1");
    if (data_.train.size() == 0 || data_.valid.size() == 0)
        throw std::invalid_argument("Learner: the training and validation sets must not be empty");
    callbacks_.push_back(std::make_shared<ProgressBar>());  // first: on a terminal it erases its line
    callbacks_.push_back(std::make_shared<ProgressPrinter>());
    keep_freed_memory();
    if (mpify::ddp::active()) {
        rank_ = mpify::ddp::rank();
        world_size_ = mpify::ddp::world_size();
        // Several ranks on one machine: each gets its share of the cores, or their
        // OpenMP pools fight over them (torchrun sets OMP_NUM_THREADS=1 for the same reason).
        const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        torch::set_num_threads(std::max(1, cores / std::max(1, mpify::local_world_size())));
    }
    device_ = checked_device(learner_device(options_), options_.precision);
    model_->to(device_);
    scaler_ = mpify::GradScaler(scaler_options());
    if (mpify::ddp::active())
        ddp_model_ = std::make_unique<mpify::DistributedDataParallel<AnyModel>>(model_, options_.ddp);
    if (options_.precision == Precision::bfloat16 && device_.is_cpu() && rank_ == 0 && !fast_bfloat16_cpu())
        std::cerr << "Learner: precision = bfloat16 on a CPU without AVX-512: LibTorch's bfloat16 convolutions run "
                     "several times slower than float32 here (accuracy is not affected). Compare both with "
                     "mpify_ddp_bench --precision 10 before training this way.\n";
}

Learner::~Learner() = default;

std::vector<std::string> Learner::metric_names() const {
    std::vector<std::string> names;
    for (const Metric& m : metrics_) names.push_back(m.name);
    return names;
}

History Learner::fit(int epochs, double lr) {
    FitPosition start;
    start.schedule = "fit";
    start.epochs = epochs;
    start.lr = lr;
    return run(start, [lr](double) { return std::pair{lr, 0.9}; });
}

History Learner::fit_one_cycle(int epochs, double max_lr) {
    FitPosition start;
    start.schedule = "fit_one_cycle";
    start.epochs = epochs;
    start.lr = max_lr;
    return run(start, [max_lr](double progress) {
        const HyperParameters p = one_cycle(max_lr, progress);
        return std::pair{p.lr, p.momentum};
    });
}

at::Tensor Learner::predict(const at::Tensor& inputs) {
    torch::NoGradGuard no_grad;
    model_->eval();
    return model_->forward(inputs.to(device_)).cpu();
}

at::Tensor Learner::forward_train(const at::Tensor& inputs) {
    return ddp_model_ ? (*ddp_model_)(inputs) : model_->forward(inputs);
}

std::pair<at::Tensor, at::Tensor> Learner::batch_of(const DataSet& data, const at::Tensor& rows) const {
    return {data.inputs.index_select(0, rows.to(data.inputs.device())).to(device_),
            data.targets.index_select(0, rows.to(data.targets.device())).to(device_)};
}

at::Tensor Learner::training_loss(const at::Tensor& inputs, const at::Tensor& targets) {
    const Autocast autocast(options_.precision, device_.type());
    return loss_(forward_train(inputs), targets).to(torch::kFloat);
}

mpify::GradScalerOptions Learner::scaler_options() const {
    mpify::GradScalerOptions scaling = options_.scaler;
    scaling.enabled = scaling.enabled && options_.precision == Precision::float16;
    return scaling;
}

double Learner::train_epoch(const at::Tensor& order, FitPosition position, std::int64_t batches, double total_steps,
                            double carried, const Schedule& schedule, History& history) {
    const std::int64_t batch = data_.batch_size;
    const std::int64_t group = options_.accumulate;
    const auto rows_of = [&](std::int64_t b) { return std::min(batch, order.size(0) - b * batch); };
    // A resumed epoch: `order` holds what is left, after `skipped` batches' worth at this
    // world size, and the partial_* fields what the batches done had.
    const std::int64_t skipped = position.batch;
    const std::int64_t samples_before = position.samples_done, batches_before = position.partial_batches;
    double loss_sum = carried;
    model_->train();
    for (std::int64_t b = 0; b < batches; ++b) {
        // The accumulation group of batch b: [first, end), one optimizer step at its end.
        const std::int64_t first = b / group * group, end = std::min(first + group, batches);
        std::int64_t group_rows = 0;
        for (std::int64_t g = first; g < end; ++g) group_rows += rows_of(g);
        const auto [lr, momentum] =
            schedule(static_cast<double>(position.epoch * position.batches_per_epoch + skipped + b) / total_steps);
        apply(*optimizer_, lr, momentum);
        const at::Tensor rows = order.narrow(0, b * batch, rows_of(b));
        if (b == first) optimizer_->zero_grad();
        const auto [inputs, targets] = batch_of(data_.train, rows);
        const at::Tensor loss = training_loss(inputs, targets);
        // Each batch's share of the group's mean (scaled, for float16); the group's other
        // batches add to the gradients without a collective, and its last one averages the
        // sum over the ranks.
        const at::Tensor share =
            scaler_.scale(loss * (static_cast<double>(rows.size(0)) / static_cast<double>(group_rows)));
        if (ddp_model_ && b + 1 < end) {
            const auto local = ddp_model_->no_sync();
            share.backward();
        } else {
            share.backward();
        }
        if (b + 1 == end) {
            scaler_.step(*optimizer_);  // (a disabled scaler always steps)
            scaler_.update();
        }
        const double value = loss.item<double>();
        loss_sum += value;
        history.batch_losses.push_back(value);
        for (const auto& cb : callbacks_) cb->after_batch(*this, skipped + b, value);
        const std::int64_t done = b + 1;
        // Within an accumulation group, the gradients so far are in no checkpoint.
        if (options_.checkpoint_dir.empty() || options_.checkpoint_every <= 0 || done == batches ||
            done % options_.checkpoint_every != 0 || done % group != 0)
            continue;
        // Every rank's losses so far, so that the resumed epoch's mean is the same.
        at::Tensor sum = torch::tensor(loss_sum, torch::kDouble);
        if (ddp_model_) mpify::ddp::all_reduce(sum);
        FitPosition at = position;
        at.batch = skipped + done;
        at.samples_done = samples_before + done * batch * world_size_;
        at.partial_batches = batches_before + done * world_size_;
        at.partial_loss_sum = sum.item<double>();
        write_checkpoint(checkpoint_path(), at, history);
    }
    return loss_sum;
}

void Learner::add_validation(const at::Tensor& rows, std::vector<double>& sums) {
    const std::int64_t batch = data_.batch_size;
    torch::NoGradGuard no_grad;
    model_->eval();
    for (std::int64_t start = 0; start < rows.size(0); start += batch) {
        const at::Tensor some = rows.narrow(0, start, std::min(batch, rows.size(0) - start));
        const auto [inputs, target] = batch_of(data_.valid, some);
        const Autocast autocast(options_.precision, device_.type());
        const at::Tensor output = model_->forward(inputs).to(torch::kFloat);
        const double n = static_cast<double>(some.size(0));
        sums[2] += loss_(output, target).item<double>() * n;
        sums[3] += n;
        for (std::size_t m = 0; m < metrics_.size(); ++m) {
            const auto [sum, count] = metrics_[m].batch(output, target);
            sums[4 + 2 * m] += sum;
            sums[5 + 2 * m] += count;
        }
    }
}

EpochRecord Learner::record_of(int epoch, std::int64_t batches, const std::vector<double>& sums) const {
    EpochRecord record;
    record.epoch = epoch + 1;
    record.batches = batches;
    record.train_loss = sums[0] / sums[1];
    record.valid_loss = sums[2] / sums[3];
    for (std::size_t m = 0; m < metrics_.size(); ++m) {
        const double mean = sums[4 + 2 * m] / sums[5 + 2 * m];
        record.metrics.push_back(metrics_[m].finish ? metrics_[m].finish(mean) : mean);
    }
    return record;
}

History Learner::run(FitPosition start, const Schedule& schedule) {
    if (start.epochs < 1) throw std::invalid_argument("Learner::fit: epochs must be at least 1");
    if (options_.accumulate < 1)
        throw std::invalid_argument("Learner::fit: LearnerOptions::accumulate is " +
                                    std::to_string(options_.accumulate) +
                                    "; it must be at least 1 (1: no accumulation)");
    History history;
    history.metric_names = metric_names();
    history.world_size = world_size_;
    make_optimizer();
    mpify::DistributedSampler sampler(data_.train.size(), rank_, world_size_, true, data_.seed);
    // Every rank runs the same number of batches: the shards have equal sizes.
    std::int64_t batches = ceil_div(sampler.shard_size(), data_.batch_size);
    if (options_.max_batches > 0) batches = std::min(batches, options_.max_batches);
    const double total_steps = static_cast<double>(start.epochs * batches);
    start.batches_per_epoch = batches;
    start.world_size = world_size_;
    start.seed = data_.seed;
    if (!options_.checkpoint_dir.empty() && !resume_or_begin(start, history)) return history_ = history;
    position_ = start;

    // Validation: rank r takes samples r, r + world, ... (no padding, so every sample
    // counts once and the summed metrics are exact).
    at::Tensor valid_rows = rank_rows(rank_, world_size_, data_.valid.size());
    if (options_.max_batches > 0)
        valid_rows = valid_rows.narrow(0, 0, std::min(valid_rows.size(0), options_.max_batches * data_.batch_size));

    for (const auto& cb : callbacks_) cb->before_fit(*this, start.epochs);
    for (int epoch = start.epoch; epoch < start.epochs; ++epoch) {
        const auto epoch_start = Clock::now();
        for (const auto& cb : callbacks_) cb->before_epoch(*this, epoch + 1, batches);
        sampler.set_epoch(epoch);
        FitPosition position = start;
        const EpochPart part = part_to_train(position, epoch, sampler, batches, data_.batch_size, world_size_);
        // The first part's losses and batches count once: on rank 0.
        const bool counts_first_part = rank_ == 0;
        // One vector of sums, reduced over the ranks in one collective:
        // [train loss, train batches, valid loss * n, valid n, (metric sum, metric count)...]
        std::vector<double> sums(4 + 2 * metrics_.size(), 0.0);
        sums[0] = train_epoch(part.order, position, part.batches, total_steps,
                              counts_first_part ? position.partial_loss_sum : 0.0, schedule, history);
        sums[1] = static_cast<double>(part.batches) +
                  (counts_first_part ? static_cast<double>(position.partial_batches) : 0.0);
        add_validation(valid_rows, sums);
        if (ddp_model_) {
            at::Tensor reduced = torch::tensor(sums, torch::kDouble);
            mpify::ddp::all_reduce(reduced);
            std::copy_n(reduced.data_ptr<double>(), sums.size(), sums.begin());
        }
        EpochRecord record = record_of(epoch, batches, sums);
        record.seconds = seconds_since(epoch_start);
        history.epochs.push_back(record);
        history.seconds += seconds_since(epoch_start);
        position.epoch = epoch + 1;
        position.batch = 0;
        position.partial_loss_sum = 0;
        position.samples_done = 0;
        position.partial_batches = 0;
        position_ = position;
        history_ = history;
        if (!options_.checkpoint_dir.empty()) write_checkpoint(checkpoint_path(), position, history);
        for (const auto& cb : callbacks_) cb->after_epoch(*this, history);
        if (std::any_of(callbacks_.begin(), callbacks_.end(), [](const auto& cb) { return cb->stop_after_epoch(); }))
            break;
    }
    for (const auto& cb : callbacks_) cb->after_fit(*this, history);
    return history_ = history;
}

std::string Learner::checkpoint_path() const {
    return (std::filesystem::path(options_.checkpoint_dir) / "checkpoint.pt").string();
}

torch::nn::Module& Learner::user_model() const { return *model_->children().front(); }

bool Learner::resume_or_begin(FitPosition& start, History& history) {
    const std::string path = checkpoint_path();
    if (rank_ == 0) check_writable_folder(options_.checkpoint_dir);  // before any training is at stake
    const std::optional<CheckpointBytes> bytes =
        open_on_every_rank(path, /*missing_is_none=*/true, rank_, ddp_model_ != nullptr);
    if (!bytes) {
        write_checkpoint(checkpoint_path(), start, history);
        return true;
    }
    const LoadedCheckpoint loaded = load_checkpoint(*bytes, user_model(), optimizer_.get(), &scaler_, data_.batch_size);
    const FitPosition& was = loaded.position;
    auto describe = [](const FitPosition& p) {
        std::ostringstream text;
        text << p.schedule << "(" << p.epochs << ", " << p.lr << ")";
        return text.str();
    };
    if (was.schedule != start.schedule || was.epochs != start.epochs || was.lr != start.lr)
        throw std::runtime_error("checkpoint " + path + " belongs to " + describe(was) + ", not to this " +
                                 describe(start) +
                                 ": run that fit to resume it, or delete the file (or choose "
                                 "another checkpoint_dir) to start afresh");
    history = loaded.history;
    history.world_size = world_size_;
    start.epoch = was.epoch;
    start.batch = was.batch;
    start.partial_loss_sum = was.partial_loss_sum;
    start.samples_done = was.samples_done;
    start.partial_batches = was.partial_batches;
    std::ostringstream note;
    note << "Learner: " << path << ": ";
    if (was.epoch >= start.epochs) {
        if (rank_ == 0)
            std::cout << note.str() << "this fit is done (" << was.epochs << " epochs); nothing to "
                      << "train. Delete the file to train again." << std::endl;
        history_ = history;
        position_ = was;
        return false;
    }
    note << "resuming after epoch " << was.epoch << " of " << was.epochs;
    if (was.batch > 0) note << ", batch " << was.batch << " of the next";
    if (was.world_size != world_size_)
        note << "; it ran on " << was.world_size << " rank(s), this on " << world_size_
             << ": the samples left are sharded anew";
    if (rank_ == 0) std::cout << note.str() << std::endl;
    return true;
}

void Learner::write_checkpoint(const std::string& path, const FitPosition& position, const History& history) {
    if (rank_ != 0) return;
    write_checkpoint_file(path, user_model(), optimizer_.get(), &scaler_, position, history);
}

void Learner::save(const std::string& path) { write_checkpoint(path, position_, history_); }

void Learner::make_optimizer() {
    if (!optimizer_)
        optimizer_ = std::make_unique<torch::optim::AdamW>(
            model_->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(options_.weight_decay));
}

void Learner::load(const std::string& path) {
    make_optimizer();
    const std::optional<CheckpointBytes> bytes =
        open_on_every_rank(path, /*missing_is_none=*/false, rank_, ddp_model_ != nullptr);
    const LoadedCheckpoint loaded = load_checkpoint(*bytes, user_model(), optimizer_.get(), &scaler_, data_.batch_size);
    position_ = loaded.position;
    history_ = loaded.history;
}

void Learner::export_model(const std::string& path) const {
    if (rank_ != 0) return;
    write_export_file(path, user_model());
}

void load_model(const std::string& path, torch::nn::Module& model) {
    load_model_bytes(CheckpointBytes::open_file(path), model);
    model.eval();
}

}  // namespace learner
MPIFY_END_NAMESPACE
