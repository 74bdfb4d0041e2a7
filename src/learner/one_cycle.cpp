#include <mpify/learner/one_cycle.hpp>

#include <algorithm>
#include <cmath>

MPIFY_BEGIN_NAMESPACE
namespace learner {
namespace {

constexpr double warm_up_fraction = 0.25;
constexpr double start_divisor = 25;
constexpr double final_divisor = 1e5;
constexpr double high_momentum = 0.95, low_momentum = 0.85;

// From `from` at t = 0 to `to` at t = 1, flat at both ends.
double cosine(double from, double to, double t) { return to + (from - to) * (1 + std::cos(M_PI * t)) / 2; }

}  // namespace

HyperParameters one_cycle(double max_lr, double progress) {
    progress = std::clamp(progress, 0.0, 1.0);
    if (progress < warm_up_fraction) {
        const double t = progress / warm_up_fraction;
        return {cosine(max_lr / start_divisor, max_lr, t), cosine(high_momentum, low_momentum, t)};
    }
    const double t = (progress - warm_up_fraction) / (1 - warm_up_fraction);
    return {cosine(max_lr, max_lr / final_divisor, t), cosine(low_momentum, high_momentum, t)};
}

}  // namespace learner
MPIFY_END_NAMESPACE
