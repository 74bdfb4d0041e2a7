#include "amp/scaler_kernels.hpp"

#include "compat/torch_compat.hpp"

#include <ATen/Functions.h>

#include <cmath>

MPIFY_BEGIN_DETAIL_NAMESPACE

namespace {

bool kernels_serve(const at::Tensor& tensor) { return MPIFY_AMP_KERNELS_ON_CPU || tensor.is_cuda(); }

}  // namespace

void unscale_and_check(std::vector<at::Tensor>& gradients, at::Tensor& found_inf, const at::Tensor& inv_scale) {
    if (gradients.empty()) return;
    if (kernels_serve(gradients.front())) {
        at::_amp_foreach_non_finite_check_and_unscale_(gradients, found_inf, inv_scale);
        return;
    }
    for (auto& gradient : gradients) {
        if (!at::isfinite(gradient).all().item<bool>()) found_inf.fill_(1.0);
        gradient.mul_(inv_scale);
    }
}

void update_scale(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf, double growth,
                  double backoff, std::int64_t interval) {
    if (kernels_serve(scale)) {
        at::_amp_update_scale_(scale, growth_tracker, found_inf, growth, backoff, interval);
        return;
    }
    // As the kernels do: the product in double, stored as float.
    const double current = scale.item<float>();
    if (found_inf.item<float>() != 0.0f) {
        scale.fill_(static_cast<float>(current * backoff));
        growth_tracker.fill_(0);
        return;
    }
    const std::int64_t good_steps = growth_tracker.item<int>() + 1;
    if (good_steps != interval) {
        growth_tracker.fill_(good_steps);
        return;
    }
    const float grown = static_cast<float>(current * growth);
    if (std::isfinite(grown)) scale.fill_(grown);
    growth_tracker.fill_(0);
}

MPIFY_END_DETAIL_NAMESPACE
