#pragma once
// From LibTorch tensors to the examples' plain images (for the compiled training code;
// notebooks never include this).
#include <visuals/image.hpp>

#include <ATen/core/Tensor.h>

namespace mpify_examples {

/// The last two dimensions of `image` (its first channel) as a grayscale image, its
/// values stretched from their minimum (black) to their maximum (white).
Image image_from_tensor(const at::Tensor& image);

}  // namespace mpify_examples
