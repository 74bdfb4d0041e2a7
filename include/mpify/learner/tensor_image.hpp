#pragma once
// From LibTorch tensors to plain images (for compiled training code, which hands them
// to a notebook or draws them; notebooks need not include this).
#include <mpify/abi.hpp>
#include <mpify/learner/image.hpp>

#include <ATen/core/Tensor.h>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// The last two dimensions of `image` (its first channel) as a grayscale image, its
/// values stretched from their minimum (black) to their maximum (white).
Image image_from_tensor(const at::Tensor& image);

}  // namespace learner
MPIFY_END_NAMESPACE
