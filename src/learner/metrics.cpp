#include <mpify/learner/metrics.hpp>

#include <ATen/ATen.h>

#include <cmath>

MPIFY_BEGIN_NAMESPACE
namespace learner {

Metric accuracy() {
    return {"accuracy",
            [](const at::Tensor& output, const at::Tensor& target) {
                const double correct = output.argmax(1).eq(target).sum().item<double>();
                return std::pair{correct, static_cast<double>(target.size(0))};
            },
            {}};
}

Metric accuracy_multi(double threshold) {
    return {"accuracy_multi",
            [threshold](const at::Tensor& output, const at::Tensor& target) {
                const at::Tensor predicted = output.sigmoid().gt(threshold);
                const double correct = predicted.eq(target.gt(0.5)).sum().item<double>();
                return std::pair{correct, static_cast<double>(target.numel())};
            },
            {}};
}

Metric exact_match(double threshold) {
    return {"exact_match",
            [threshold](const at::Tensor& output, const at::Tensor& target) {
                const at::Tensor predicted = output.sigmoid().gt(threshold);
                const double all_right = predicted.eq(target.gt(0.5)).all(1).sum().item<double>();
                return std::pair{all_right, static_cast<double>(target.size(0))};
            },
            {}};
}

Metric rmse() {
    return {"rmse",
            [](const at::Tensor& output, const at::Tensor& target) {
                const double squared = (output.view(-1) - target.view(-1)).pow(2).sum().item<double>();
                return std::pair{squared, static_cast<double>(target.numel())};
            },
            [](double mean_squared) { return std::sqrt(mean_squared); }};
}

}  // namespace learner
MPIFY_END_NAMESPACE
