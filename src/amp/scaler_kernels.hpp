#pragma once
// The two device-side steps of loss scaling, with the semantics of LibTorch's kernels
// (_amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_): those kernels
// where this LibTorch has them for the tensors' device, the same arithmetic in plain
// tensor operations where it does not (the CPU of LibTorch 1.13).
#include <mpify/abi.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Multiplies each of `gradients` (one device, one dtype) by `inv_scale` in place, and
/// sets `found_inf` (a float32 scalar on their device) to 1 if any value is inf or NaN.
void unscale_and_check(std::vector<at::Tensor>& gradients, at::Tensor& found_inf, const at::Tensor& inv_scale);

/// The scale's next value: times `backoff` when `found_inf` is not 0 (and the count of
/// good steps back to 0); else the count grows, and at `interval` the scale is multiplied
/// by `growth` (kept if that is not finite) and the count restarts.
void update_scale(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf, double growth,
                  double backoff, std::int64_t interval);

MPIFY_END_DETAIL_NAMESPACE
