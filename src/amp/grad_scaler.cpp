#include <mpify/error.hpp>
#include <mpify/grad_scaler.hpp>

#include "amp/scaler_kernels.hpp"

#include <ATen/Functions.h>
#include <fmt/format.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

MPIFY_BEGIN_NAMESPACE

namespace {

// The archive's keys: one prefix, so that a scaler shares an archive with a model or an
// optimizer.
constexpr const char* archive_prefix = "mpify_grad_scaler.";

void check_growth_factor(double factor) {
    if (!(factor > 1.0) || !std::isfinite(factor))
        throw UsageError(fmt::format("mpify::GradScaler: growth_factor must be a finite number above 1, not {}",
                                     factor));
}
void check_backoff_factor(double factor) {
    if (!(factor > 0.0 && factor < 1.0))
        throw UsageError(fmt::format("mpify::GradScaler: backoff_factor must be between 0 and 1 (excluded), not {}",
                                     factor));
}
void check_growth_interval(std::int64_t interval) {
    if (interval <= 0 || interval > std::numeric_limits<int>::max())
        throw UsageError(fmt::format("mpify::GradScaler: growth_interval must be a positive int, not {}", interval));
}
void check_scale_value(const char* what, double scale) {
    if (!(scale > 0.0) || !std::isfinite(scale))
        throw UsageError(fmt::format("mpify::GradScaler: {} must be a finite number above 0, not {}", what, scale));
}

void check_state(const GradScalerState& state) {
    check_scale_value("the scale", state.scale);
    check_growth_factor(state.growth_factor);
    check_backoff_factor(state.backoff_factor);
    check_growth_interval(state.growth_interval);
    if (state.growth_tracker < 0 || state.growth_tracker >= state.growth_interval)
        throw UsageError(fmt::format("mpify::GradScaler: growth_tracker must be in [0, growth_interval = {}), not {}",
                                     state.growth_interval, state.growth_tracker));
}

}  // namespace

struct GradScaler::Impl {
    // Where one optimizer is in the current iteration.
    enum class Stage { ready, unscaled, stepped };
    // One optimizer's iteration: its stage, and per device of its gradients whether one
    // held an inf or a NaN (a float32 scalar on that device, read only at step and update).
    struct OptimizerRound {
        Stage stage = Stage::ready;
        std::map<std::string, at::Tensor> found_inf_by_device;
    };

    bool enabled = true;
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    std::int64_t growth_interval = 2000;
    // What the scale and the count start from, until scale() places them on a device.
    double init_scale = 65536.0;
    std::int64_t init_growth_tracker = 0;
    at::Tensor scale;           // float32 scalar
    at::Tensor growth_tracker;  // int32 scalar, on the scale's device
    std::map<const torch::optim::Optimizer*, OptimizerRound> rounds;

    // The scale, or a UsageError naming `call` when no scale() came first.
    const at::Tensor& placed_scale(const char* call) const {
        if (!scale.defined())
            throw UsageError(fmt::format("mpify::GradScaler::{}: nothing was scaled yet; call scale(loss).backward() "
                                         "first in each iteration",
                                         call));
        return scale;
    }
};

GradScaler::GradScaler(const GradScalerOptions& options) : impl_(std::make_unique<Impl>()) {
    impl_->enabled = options.enabled;
    if (!options.enabled) return;
    check_scale_value("init_scale", options.init_scale);
    check_growth_factor(options.growth_factor);
    check_backoff_factor(options.backoff_factor);
    check_growth_interval(options.growth_interval);
    impl_->init_scale = options.init_scale;
    impl_->growth_factor = options.growth_factor;
    impl_->backoff_factor = options.backoff_factor;
    impl_->growth_interval = options.growth_interval;
}

GradScaler::~GradScaler() = default;
GradScaler::GradScaler(GradScaler&&) noexcept = default;
GradScaler& GradScaler::operator=(GradScaler&&) noexcept = default;

at::Tensor GradScaler::scale(const at::Tensor& output) {
    if (!impl_->enabled) return output;
    if (!output.defined()) throw UsageError("mpify::GradScaler::scale: the tensor to scale is undefined");
    if (!impl_->scale.defined()) {
        const auto on = at::TensorOptions().device(output.device());
        impl_->scale = at::full({}, impl_->init_scale, on.dtype(at::kFloat));
        impl_->growth_tracker = at::full({}, impl_->init_growth_tracker, on.dtype(at::kInt));
    }
    return output * impl_->scale.to(output.device(), /*non_blocking=*/true);
}

std::vector<at::Tensor> GradScaler::scale(const std::vector<at::Tensor>& outputs) {
    std::vector<at::Tensor> scaled;
    scaled.reserve(outputs.size());
    for (const auto& output : outputs) scaled.push_back(scale(output));
    return scaled;
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
    if (!impl_->enabled) return;
    const at::Tensor& scale = impl_->placed_scale("unscale_");
    Impl::OptimizerRound& round = impl_->rounds[&optimizer];
    if (round.stage == Impl::Stage::unscaled)
        throw UsageError("mpify::GradScaler::unscale_: already called for this optimizer since the last update()");
    if (round.stage == Impl::Stage::stepped)
        throw UsageError("mpify::GradScaler::unscale_: called after step() for this optimizer; unscale before the "
                         "step, then update()");

    // The reciprocal in double, as torch's does: float32's may be off by one unit.
    const at::Tensor inv_scale = scale.to(at::kDouble).reciprocal().to(at::kFloat);
    const at::Tensor found_inf = at::zeros({}, scale.options().dtype(at::kFloat));

    // The kernel takes the gradients of one device and one dtype at a time.
    std::map<std::pair<std::string, int>, std::vector<at::Tensor>> by_device_and_dtype;
    std::size_t index = 0;
    for (auto& group : optimizer.param_groups()) {
        for (auto& parameter : group.params()) {
            const at::Tensor& gradient = parameter.grad();
            ++index;
            if (!gradient.defined()) continue;
            if (gradient.scalar_type() == at::kHalf)
                throw UsageError(fmt::format(
                    "mpify::GradScaler::unscale_: parameter {} of the optimizer has a float16 gradient; keep the "
                    "parameters in float32 and let autocast run the forward in float16",
                    index));
            at::Tensor values = gradient.is_sparse() ? gradient._values() : gradient;
            by_device_and_dtype[{values.device().str(), static_cast<int>(values.scalar_type())}].push_back(values);
        }
    }
    round.found_inf_by_device.clear();
    for (auto& [key, gradients] : by_device_and_dtype) {
        auto [found, fresh] = round.found_inf_by_device.try_emplace(key.first);
        const auto device = gradients.front().device();
        if (fresh) found->second = found_inf.to(device, /*non_blocking=*/true, /*copy=*/true);
        detail::unscale_and_check(gradients, found->second, inv_scale.to(device, /*non_blocking=*/true));
    }
    round.stage = Impl::Stage::unscaled;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
    if (!impl_->enabled) {
        optimizer.step();
        return true;
    }
    impl_->placed_scale("step");
    Impl::OptimizerRound& round = impl_->rounds[&optimizer];
    if (round.stage == Impl::Stage::stepped)
        throw UsageError("mpify::GradScaler::step: already called for this optimizer since the last update()");
    if (round.stage == Impl::Stage::ready) unscale_(optimizer);
    if (round.found_inf_by_device.empty())
        throw UsageError("mpify::GradScaler::step: none of the optimizer's parameters has a gradient; call "
                         "scale(loss).backward() before the step");
    double found = 0.0;
    for (const auto& [device, found_inf] : round.found_inf_by_device) found += found_inf.item<float>();
    const bool steps = found == 0.0;
    if (steps) optimizer.step();
    round.stage = Impl::Stage::stepped;
    return steps;
}

void GradScaler::update() {
    if (!impl_->enabled) return;
    const at::Tensor& scale = impl_->placed_scale("update");
    at::Tensor combined;
    for (const auto& [optimizer, round] : impl_->rounds) {
        for (const auto& [device, found_inf] : round.found_inf_by_device) {
            at::Tensor here = found_inf.to(scale.device(), /*non_blocking=*/true);
            combined = combined.defined() ? combined + here : here;
        }
    }
    if (!combined.defined())
        throw UsageError("mpify::GradScaler::update: no optimizer was unscaled or stepped since the last update(); "
                         "call step(optimizer) first");
    detail::update_scale(impl_->scale, impl_->growth_tracker, combined, impl_->growth_factor, impl_->backoff_factor,
                         impl_->growth_interval);
    impl_->rounds.clear();
}

void GradScaler::update(double new_scale) {
    if (!impl_->enabled) return;
    impl_->placed_scale("update");
    check_scale_value("update's new scale", new_scale);
    impl_->scale.fill_(new_scale);
    impl_->rounds.clear();
}

double GradScaler::get_scale() const {
    if (!impl_->enabled) return 1.0;
    return impl_->scale.defined() ? impl_->scale.item<float>() : impl_->init_scale;
}

std::int64_t GradScaler::growth_tracker() const {
    if (!impl_->enabled) return 0;
    return impl_->growth_tracker.defined() ? impl_->growth_tracker.item<int>() : impl_->init_growth_tracker;
}

bool GradScaler::is_enabled() const { return impl_->enabled; }
double GradScaler::growth_factor() const { return impl_->growth_factor; }
void GradScaler::set_growth_factor(double factor) {
    check_growth_factor(factor);
    impl_->growth_factor = factor;
}
double GradScaler::backoff_factor() const { return impl_->backoff_factor; }
void GradScaler::set_backoff_factor(double factor) {
    check_backoff_factor(factor);
    impl_->backoff_factor = factor;
}
std::int64_t GradScaler::growth_interval() const { return impl_->growth_interval; }
void GradScaler::set_growth_interval(std::int64_t interval) {
    check_growth_interval(interval);
    impl_->growth_interval = interval;
}

GradScalerState GradScaler::state() const {
    return GradScalerState{get_scale(), impl_->growth_factor, impl_->backoff_factor, impl_->growth_interval,
                           growth_tracker()};
}

void GradScaler::load_state(const GradScalerState& state) {
    if (!impl_->enabled) return;
    check_state(state);
    impl_->init_scale = state.scale;
    impl_->init_growth_tracker = state.growth_tracker;
    impl_->growth_factor = state.growth_factor;
    impl_->backoff_factor = state.backoff_factor;
    impl_->growth_interval = state.growth_interval;
    if (impl_->scale.defined()) {
        impl_->scale.fill_(state.scale);
        impl_->growth_tracker.fill_(state.growth_tracker);
    }
}

void GradScaler::save(torch::serialize::OutputArchive& archive) const {
    const GradScalerState s = state();
    const std::string prefix = archive_prefix;
    archive.write(prefix + "scale", c10::IValue(s.scale));
    archive.write(prefix + "growth_factor", c10::IValue(s.growth_factor));
    archive.write(prefix + "backoff_factor", c10::IValue(s.backoff_factor));
    archive.write(prefix + "growth_interval", c10::IValue(s.growth_interval));
    archive.write(prefix + "growth_tracker", c10::IValue(s.growth_tracker));
}

void GradScaler::load(torch::serialize::InputArchive& archive) {
    const std::string prefix = archive_prefix;
    auto read = [&](const char* name) {
        c10::IValue value;
        if (!archive.try_read(prefix + name, value))
            throw UsageError(fmt::format("mpify::GradScaler::load: the archive holds no scaler (no '{}{}'); was it "
                                         "written by GradScaler::save?",
                                         prefix, name));
        return value;
    };
    auto read_double = [&](const char* name) {
        const c10::IValue value = read(name);
        if (!value.isDouble())
            throw UsageError(fmt::format("mpify::GradScaler::load: '{}{}' is not a number", prefix, name));
        return value.toDouble();
    };
    auto read_int = [&](const char* name) {
        const c10::IValue value = read(name);
        if (!value.isInt())
            throw UsageError(fmt::format("mpify::GradScaler::load: '{}{}' is not an integer", prefix, name));
        return value.toInt();
    };
    GradScalerState state;
    state.scale = read_double("scale");
    state.growth_factor = read_double("growth_factor");
    state.backoff_factor = read_double("backoff_factor");
    state.growth_interval = read_int("growth_interval");
    state.growth_tracker = read_int("growth_tracker");
    load_state(state);
}

torch::serialize::OutputArchive& operator<<(torch::serialize::OutputArchive& archive, const GradScaler& scaler) {
    scaler.save(archive);
    return archive;
}

torch::serialize::InputArchive& operator>>(torch::serialize::InputArchive& archive, GradScaler& scaler) {
    scaler.load(archive);
    return archive;
}

MPIFY_END_NAMESPACE
