// SyncBatchNorm's forward and backward: batch normalization with the statistics of every
// rank's batch together.
//
// On CUDA, LibTorch's kernels made for this do the arithmetic (batch_norm_stats,
// batch_norm_gather_stats_with_counts, batch_norm_elemt, batch_norm_backward_reduce,
// batch_norm_backward_elemt), as PyTorch's own SyncBatchNorm has them: each rank's mean
// and 1/std are combined with their counts, a merge that keeps precision where sums of
// squares would lose it.
//
// Those kernels exist for CUDA only. On the CPU each pass takes its per-channel reductions
// from the fused kernels plain BatchNorm uses (the local statistics, the local backward
// sums), exchanges one vector of per-channel sums with an all-reduce — sums add across
// ranks whatever each rank's batch size, where means would need weights — and finishes
// with elementwise operations. The sums are in double, so that the variance taken as
// E[x²] - E[x]² keeps float32's precision for ordinary activations.
//
// Both exchange through all-reduces only, the one collective every backend of mpify's has
// for every device (and the one its record of collectives checks).
#include "ddp/active_group.hpp"
#include "ddp/collective_wait.hpp"

#include <mpify/ddp.hpp>
#include <mpify/error.hpp>
#include <mpify/sync_batch_norm.hpp>

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/nn/functional/batchnorm.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <tuple>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

const char* const forward_site = "mpify::SyncBatchNorm forward";
const char* const backward_site = "mpify::SyncBatchNorm backward";

/// Sums `sums` over every rank of the active group, in place.
void sum_over_ranks(at::Tensor& sums, const char* site) {
    const ProcessGroupState& group = active_group(site);
    std::vector<at::Tensor> tensors{sums};
    const std::uint64_t sequence = record_collective("allreduce", &sums, "SUM", site);
    run_collective(site, sequence, [&] { return group.group()->allreduce(tensors); });
}

/// A per-channel vector shaped to broadcast over `input` (1, C, 1, ...).
at::Tensor per_channel(const at::Tensor& values, const at::Tensor& input) {
    std::vector<std::int64_t> shape(static_cast<std::size_t>(input.dim()), 1);
    shape[1] = values.size(0);
    return values.reshape(shape);
}

// A custom autograd Function of this LibTorch takes no undefined tensor (it asks each
// input's device): an absent weight, bias or running statistic travels as an empty tensor.
at::Tensor or_empty(const at::Tensor& tensor) { return tensor.defined() ? tensor : at::empty({0}); }
at::Tensor unless_empty(const at::Tensor& tensor) { return tensor.numel() > 0 ? tensor : at::Tensor(); }

/// Training normalizes over more than one value per channel: an Error naming the module
/// otherwise. `count` is the global batch's, `input` this rank's.
void check_global_count(const char* module_name, double count, const at::Tensor& input) {
    if (count > 1) return;
    throw Error(fmt::format("{}: the global batch holds {} value(s) per channel (this rank's input: {}); "
                            "training normalizes over more than one: give the ranks larger batches",
                            module_name, count, fmt::join(input.sizes(), " x ")));
}

/// What both forwards save for backward, first: the input, the weight (empty: none), the
/// global mean and 1/sqrt(var + eps).
struct SavedNormalization {
    at::Tensor input, weight, mean, invstd;
    std::vector<at::Tensor> rest;  ///< what a forward saved after them

    explicit SavedNormalization(torch::autograd::AutogradContext* context) {
        rest = context->get_saved_variables();
        input = rest[0];
        weight = unless_empty(rest[1]);
        mean = rest[2];
        invstd = rest[3];
        rest.erase(rest.begin(), rest.begin() + 4);
    }
};

/// The autograd node of a synchronized training forward. Saved for backward: the input,
/// the weight, the global mean and 1/sqrt(var + eps), and the global count.
struct GlobalBatchNorm : torch::autograd::Function<GlobalBatchNorm> {
    static at::Tensor forward(torch::autograd::AutogradContext* context, const at::Tensor& input,
                              const at::Tensor& given_weight, const at::Tensor& given_bias, const char* module_name,
                              const at::Tensor& given_running_mean, const at::Tensor& given_running_var,
                              double momentum, double eps) {
        const at::Tensor weight = unless_empty(given_weight), bias = unless_empty(given_bias);
        const at::Tensor running_mean = unless_empty(given_running_mean);
        const at::Tensor running_var = unless_empty(given_running_var);
        const std::int64_t channels = input.size(1);
        // One vector: [sum x (C), sum x² (C), count (1)], from this rank's mean and biased
        // variance (LibTorch's fused CPU kernel: one pass, accumulated in double).
        at::Tensor sums = at::zeros({2 * channels + 1}, input.options().dtype(at::kDouble));
        const double local_count = static_cast<double>(channels == 0 ? 0 : input.numel() / channels);
        if (input.numel() > 0) {
            const auto [local_mean, local_var] = at::batch_norm_update_stats(input, {}, {}, 0.0);
            const at::Tensor mean = local_mean.to(at::kDouble);
            sums.narrow(0, 0, channels).copy_(mean * local_count);
            sums.narrow(0, channels, channels).copy_((local_var.to(at::kDouble) + mean * mean) * local_count);
        }
        sums[2 * channels] = local_count;
        sum_over_ranks(sums, forward_site);

        const double count = sums[2 * channels].item<double>();
        check_global_count(module_name, count, input);
        const at::Tensor mean = sums.narrow(0, 0, channels) / count;
        const at::Tensor biased_var = (sums.narrow(0, channels, channels) / count - mean * mean).clamp_min(0);
        if (running_mean.defined()) {
            at::NoGradGuard no_grad;
            running_mean.mul_(1 - momentum).add_(mean.to(running_mean.scalar_type()), momentum);
            running_var.mul_(1 - momentum)
                .add_((biased_var * (count / (count - 1))).to(running_var.scalar_type()), momentum);
        }
        const at::Tensor typed_mean = mean.to(input.scalar_type());
        const at::Tensor invstd = (biased_var + eps).rsqrt().to(input.scalar_type());
        context->save_for_backward({input, given_weight, typed_mean, invstd});
        context->saved_data["count"] = count;
        // LibTorch's own CPU kernel normalizes with the statistics given (eval mode's path).
        return at::batch_norm(input, weight, bias, typed_mean, biased_var.to(input.scalar_type()),
                              /*training=*/false, 0.0, eps, /*cudnn_enabled=*/false);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                   torch::autograd::variable_list output_gradients) {
        const SavedNormalization saved(context);
        const at::Tensor &input = saved.input, &weight = saved.weight, &mean = saved.mean, &invstd = saved.invstd;
        const double count = context->saved_data["count"].toDouble();
        const std::int64_t channels = input.size(1);
        at::Tensor dy = output_gradients[0];
        if (!dy.defined()) dy = at::zeros_like(input);

        // This rank's [sum dy (C), sum dy·(x - mean) (C)], from LibTorch's fused backward
        // kernel (its bias gradient, and its weight gradient over invstd): the weight's and
        // bias's gradients (each rank's own, as for any parameter: DDP averages them), and,
        // summed over all ranks, what the input's gradient needs.
        at::Tensor sums = at::zeros({2 * channels}, input.options().dtype(at::kDouble));
        at::Tensor grad_weight, grad_bias;
        if (input.numel() > 0) {
            const at::Tensor unit_weight = at::ones({channels}, invstd.options());
            const auto reduced = at::native_batch_norm_backward(dy, input, unit_weight, {}, {}, mean, invstd,
                                                                /*train=*/true, 0.0, {false, true, true});
            const at::Tensor& sum_dy = std::get<2>(reduced);
            const at::Tensor& sum_dy_normalized = std::get<1>(reduced);  // sum dy·(x - mean)·invstd
            sums.narrow(0, 0, channels).copy_(sum_dy);
            sums.narrow(0, channels, channels).copy_(sum_dy_normalized.to(at::kDouble) / invstd.to(at::kDouble));
            if (weight.defined()) {
                grad_weight = sum_dy_normalized.to(weight.scalar_type());
                grad_bias = sum_dy.to(weight.scalar_type());
            }
        } else if (weight.defined()) {  // an empty rank: its gradients are zero
            grad_weight = at::zeros_like(weight);
            grad_bias = at::zeros_like(weight);
        }
        at::Tensor grad_input;
        if (context->needs_input_grad(0)) {
            sum_over_ranks(sums, backward_site);
            // grad_input = (dy - mean(dy) - (x - mean)·invstd²·mean(dy·(x - mean)))·invstd·w over the
            // global batch: per channel, dy·a + x·b + c.
            const at::Tensor mean_dy = sums.narrow(0, 0, channels) / count;
            const at::Tensor mean_dy_centered = sums.narrow(0, channels, channels) / count;
            const at::Tensor invstd_d = invstd.to(at::kDouble);
            const at::Tensor scale = weight.defined() ? invstd_d * weight.to(at::kDouble) : invstd_d;
            const at::Tensor b = -scale * invstd_d * invstd_d * mean_dy_centered;
            const at::Tensor c = -scale * mean_dy - b * mean.to(at::kDouble);
            const auto typed = [&](const at::Tensor& t) { return per_channel(t.to(input.scalar_type()), input); };
            grad_input = at::addcmul(dy * typed(scale), input, typed(b)).add_(typed(c));
        }
        // One gradient per forward argument; none for the name, buffers and numbers.
        return {grad_input,   grad_weight,  grad_bias,    at::Tensor(),
                at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
};

/// The autograd node of a synchronized training forward on CUDA, with LibTorch's kernels.
/// Saved for backward: the input, the weight, the global mean and 1/std, and the count of
/// each rank that had values (int32, as batch_norm_backward_elemt takes them).
struct GlobalBatchNormOnCuda : torch::autograd::Function<GlobalBatchNormOnCuda> {
    static at::Tensor forward(torch::autograd::AutogradContext* context, const at::Tensor& input,
                              const at::Tensor& given_weight, const at::Tensor& given_bias, const char* module_name,
                              const at::Tensor& given_running_mean, const at::Tensor& given_running_var,
                              double momentum, double eps) {
        const at::Tensor weight = unless_empty(given_weight), bias = unless_empty(given_bias);
        const std::int64_t channels = input.size(1);
        const ProcessGroupState& group = active_group(forward_site);
        // Row r of a (ranks, 2C + 1) table: rank r's [mean (C), 1/std (C), count (1)]. Each
        // rank fills its own row of zeros; their sum over the ranks is every rank's row.
        const auto stats_type = input.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
        at::Tensor table = at::zeros({group.world_size, 2 * channels + 1}, input.options().dtype(stats_type));
        at::Tensor row = table[group.rank];
        const std::int64_t local_count = channels == 0 ? 0 : input.numel() / channels;
        if (input.numel() > 0) {
            const auto [local_mean, local_invstd] = at::batch_norm_stats(input, eps);
            row.narrow(0, 0, channels).copy_(local_mean);
            row.narrow(0, channels, channels).copy_(local_invstd);
        }
        row[2 * channels] = static_cast<double>(local_count);
        sum_over_ranks(table, forward_site);

        // A rank without values has no statistics to merge: its row is left out.
        const at::Tensor counts_of_all = table.select(1, 2 * channels);
        const at::Tensor present = table.index_select(0, at::nonzero(counts_of_all > 0).reshape({-1}));
        const double count = counts_of_all.sum().item<double>();
        check_global_count(module_name, count, input);
        const at::Tensor counts = present.select(1, 2 * channels);
        const auto [mean, invstd] = at::batch_norm_gather_stats_with_counts(
            input, present.narrow(1, 0, channels), present.narrow(1, channels, channels),
            unless_empty(given_running_mean), unless_empty(given_running_var), momentum, eps, counts);
        context->save_for_backward({input, given_weight, mean, invstd, counts.to(at::kInt)});
        if (input.numel() == 0) return at::empty_like(input);
        return at::batch_norm_elemt(input, weight, bias, mean, invstd, eps);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                   torch::autograd::variable_list output_gradients) {
        const SavedNormalization saved(context);
        const at::Tensor &input = saved.input, &weight = saved.weight, &mean = saved.mean, &invstd = saved.invstd;
        const at::Tensor& counts = saved.rest[0];
        const std::int64_t channels = input.size(1);
        at::Tensor dy = output_gradients[0].defined() ? output_gradients[0].contiguous() : at::zeros_like(input);

        // This rank's per-channel sums of dy and dy·(x - mean), and its own weight and bias
        // gradients (DDP averages those as any parameter's).
        at::Tensor sum_dy, sum_dy_xmu, grad_weight, grad_bias;
        const bool for_weight = weight.defined();
        if (input.numel() > 0) {
            std::tie(sum_dy, sum_dy_xmu, grad_weight, grad_bias) = at::batch_norm_backward_reduce(
                dy, input, mean, invstd, weight, /*input_g=*/true, for_weight, for_weight);
        } else {  // an empty rank: nothing of its own to add
            sum_dy = at::zeros({channels}, mean.options());
            sum_dy_xmu = at::zeros({channels}, mean.options());
            if (for_weight) {
                grad_weight = at::zeros_like(weight);
                grad_bias = at::zeros_like(weight);
            }
        }
        at::Tensor grad_input;
        if (context->needs_input_grad(0)) {
            at::Tensor sums = at::cat({sum_dy, sum_dy_xmu});
            sum_over_ranks(sums, backward_site);
            grad_input = input.numel() == 0 ? at::zeros_like(input)
                                            : at::batch_norm_backward_elemt(dy, input, mean, invstd, weight,
                                                                            sums.narrow(0, 0, channels),
                                                                            sums.narrow(0, channels, channels), counts);
        }
        return {grad_input,   grad_weight,  grad_bias,    at::Tensor(),
                at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
};

}  // namespace

at::Tensor sync_batch_norm(const char* module_name, const at::Tensor& input, const torch::nn::BatchNormOptions& options,
                           bool training, const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& running_mean, const at::Tensor& running_var,
                           const at::Tensor& num_batches_tracked) {
    if (input.size(1) != options.num_features()) {
        throw UsageError(fmt::format("{}: input of {} channels (sizes {}), the module has {} features", module_name,
                                     input.size(1), fmt::join(input.sizes(), " x "), options.num_features()));
    }
    // As torch::nn::BatchNorm: the factor by which running statistics move.
    double factor = options.momentum() ? *options.momentum() : 0.0;
    if (training && options.track_running_stats() && num_batches_tracked.defined()) {
        at::NoGradGuard no_grad;
        num_batches_tracked.add_(1);
        if (!options.momentum()) factor = 1.0 / num_batches_tracked.item<double>();
    }
    const bool batch_statistics = training || !options.track_running_stats();
    const bool synchronized = training && group_is_active() && active_group(module_name).world_size > 1;
    if (!synchronized) {
        return torch::nn::functional::detail::batch_norm(input, running_mean, running_var, weight, bias,
                                                         batch_statistics, factor, options.eps());
    }
    const at::Tensor updated_mean = options.track_running_stats() ? or_empty(running_mean) : at::empty({0});
    const at::Tensor updated_var = options.track_running_stats() ? or_empty(running_var) : at::empty({0});
    const at::Tensor contiguous = input.is_contiguous() ? input : input.contiguous();
    if (input.is_cuda())
        return GlobalBatchNormOnCuda::apply(contiguous, or_empty(weight), or_empty(bias), module_name, updated_mean,
                                            updated_var, factor, options.eps());
    return GlobalBatchNorm::apply(contiguous, or_empty(weight), or_empty(bias), module_name, updated_mean, updated_var,
                                  factor, options.eps());
}

void check_batch_norm_dims(const char* module_name, std::size_t dims, const at::Tensor& input) {
    const std::int64_t got = input.dim();
    const bool fits = dims == 1 ? (got == 2 || got == 3) : got == static_cast<std::int64_t>(dims) + 2;
    if (fits) return;
    const std::string expected = dims == 1 ? "2D or 3D" : std::to_string(dims + 2) + "D";
    throw UsageError(fmt::format("{}: expected {} input (got {}D input, sizes {})", module_name, expected, got,
                                 fmt::join(input.sizes(), " x ")));
}

void print_batch_norm(std::ostream& stream, const char* module_name, const torch::nn::BatchNormOptions& options) {
    stream << module_name << "(" << options.num_features() << ", eps=" << options.eps() << ", momentum=";
    if (options.momentum()) stream << *options.momentum();
    else stream << "None";
    stream << ", affine=" << (options.affine() ? "true" : "false")
           << ", track_running_stats=" << (options.track_running_stats() ? "true" : "false") << ")";
}

MPIFY_END_DETAIL_NAMESPACE
