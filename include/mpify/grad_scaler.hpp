#pragma once
// GradScaler: loss scaling for training in float16, LibTorch's missing counterpart of
// Python's torch.amp.GradScaler, with the same rules, defaults and state.
//
// Gradients computed in float16 underflow to zero where they are small. The scaler
// multiplies the loss by a large factor before backward, divides the gradients by it
// before the optimizer steps, skips the steps whose gradients hold an inf or a NaN, and
// adapts the factor: halved after a skipped step, doubled after `growth_interval`
// steps in a row without one.
//
//   mpify::GradScaler scaler;
//   for (auto& batch : loader) {
//       optimizer.zero_grad();
//       at::Tensor loss = loss_fn(model->forward(batch.data), batch.target);  // under autocast
//       scaler.scale(loss).backward();
//       scaler.unscale_(optimizer);              // optional: to clip the true gradients
//       torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
//       scaler.step(optimizer);                  // skipped if a gradient is inf or NaN
//       scaler.update();
//   }
//
// Under DistributedDataParallel every rank sees the same (all-reduced) gradients, so
// every rank skips the same steps and keeps the same scale. The scaler works on any
// device (on the CPU too); its state lives on the device of the first tensor it scales.
#include <mpify/abi.hpp>
#include <mpify/export.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace torch {
namespace optim {
class Optimizer;
}  // namespace optim
namespace serialize {
class OutputArchive;
class InputArchive;
}  // namespace serialize
}  // namespace torch

MPIFY_BEGIN_NAMESPACE

/// The settings of a GradScaler, with torch.amp.GradScaler's defaults.
struct GradScalerOptions {
    /// The scale before the first update.
    double init_scale = 65536.0;
    /// What the scale is multiplied by after `growth_interval` steps in a row that were
    /// not skipped (must be > 1).
    double growth_factor = 2.0;
    /// What the scale is multiplied by after a skipped step (must be in (0, 1)).
    double backoff_factor = 0.5;
    /// How many steps in a row without an inf or NaN gradient grow the scale (must be > 0).
    std::int64_t growth_interval = 2000;
    /// false: scale() returns its input, unscale_() and update() do nothing and step()
    /// always steps (a float32 run keeps the same training loop).
    bool enabled = true;
};

/// What a GradScaler carries from one run to the next: what torch.amp.GradScaler's
/// state_dict() holds, under the same names.
struct GradScalerState {
    /// The current scale.
    double scale = 65536.0;
    /// GradScalerOptions::growth_factor.
    double growth_factor = 2.0;
    /// GradScalerOptions::backoff_factor.
    double backoff_factor = 0.5;
    /// GradScalerOptions::growth_interval.
    std::int64_t growth_interval = 2000;
    /// Steps in a row not skipped since the scale last changed.
    std::int64_t growth_tracker = 0;
};

/// Scales losses and unscales gradients for float16 training (see the top of this header).
/// One scaler serves any number of optimizers; per iteration: scale(loss).backward(),
/// then for each optimizer an optional unscale_() and one step(), then one update().
/// Misuse (a second unscale_ or step before update, update with no step) is a
/// mpify::UsageError naming the call. Not thread-safe: one scaler per training loop.
class MPIFY_API GradScaler {
public:
    /// A scaler with `options`; throws mpify::UsageError for a factor or interval out of range.
    explicit GradScaler(const GradScalerOptions& options = {});
    /// Frees the scaler's state.
    ~GradScaler();
    /// Moves the scaler's state.
    GradScaler(GradScaler&&) noexcept;
    /// Moves the scaler's state.
    GradScaler& operator=(GradScaler&&) noexcept;
    GradScaler(const GradScaler&) = delete;
    GradScaler& operator=(const GradScaler&) = delete;

    /// `output` multiplied by the current scale (`output` itself when disabled). The first
    /// call places the scaler's state on `output`'s device.
    at::Tensor scale(const at::Tensor& output);
    /// Each of `outputs` multiplied by the current scale.
    std::vector<at::Tensor> scale(const std::vector<at::Tensor>& outputs);

    /// Divides the gradients of `optimizer`'s parameters by the scale, in place, and notes
    /// whether any of them holds an inf or a NaN. At most once per optimizer between two
    /// updates, before its step; step() calls it when it was not called. Gradients in
    /// float16 are refused (the parameters of a float16 forward stay float32).
    void unscale_(torch::optim::Optimizer& optimizer);
    /// Unscales `optimizer`'s gradients unless unscale_ did, then steps the optimizer
    /// unless a gradient holds an inf or a NaN. Returns whether it stepped (torch's
    /// returns the step's result; skipped steps are what a C++ loop wants to count).
    /// Reads one value back from the device.
    bool step(torch::optim::Optimizer& optimizer);
    /// Ends the iteration: backs the scale off if any optimizer's step was skipped since
    /// the last update, else counts the step and grows the scale every growth_interval.
    void update();
    /// Ends the iteration with the scale set to `new_scale` (the growth count is kept).
    void update(double new_scale);

    /// The current scale (init_scale before the first scale(); 1 when disabled). Reads
    /// it back from the device.
    double get_scale() const;
    /// Steps in a row not skipped since the scale last changed.
    std::int64_t growth_tracker() const;
    /// Whether the scaler scales (GradScalerOptions::enabled).
    bool is_enabled() const;
    /// The growth factor in use.
    double growth_factor() const;
    /// Sets the growth factor (> 1).
    void set_growth_factor(double factor);
    /// The backoff factor in use.
    double backoff_factor() const;
    /// Sets the backoff factor (in (0, 1)).
    void set_backoff_factor(double factor);
    /// The growth interval in use.
    std::int64_t growth_interval() const;
    /// Sets the growth interval (> 0).
    void set_growth_interval(std::int64_t interval);

    /// The scale, factors, interval and growth count, for a checkpoint (taken after
    /// update(), as torch's state_dict()).
    GradScalerState state() const;
    /// Continues from `state` (what state() returned, here or in an earlier run).
    /// Throws mpify::UsageError for a value out of range, changing nothing then.
    void load_state(const GradScalerState& state);

    /// Writes state() into `archive` (torch::save(scaler, path) calls it).
    void save(torch::serialize::OutputArchive& archive) const;
    /// Reads what save() wrote; throws mpify::UsageError, changing nothing, when the
    /// archive holds no scaler or a value out of range.
    void load(torch::serialize::InputArchive& archive);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// Writes `scaler`'s state into `archive`, as torch::save(scaler, path) does.
MPIFY_API torch::serialize::OutputArchive& operator<<(torch::serialize::OutputArchive& archive,
                                                      const GradScaler& scaler);
/// Reads a scaler's state from `archive`, as torch::load(scaler, path) does.
MPIFY_API torch::serialize::InputArchive& operator>>(torch::serialize::InputArchive& archive, GradScaler& scaler);

MPIFY_END_NAMESPACE
