#include <mpify/learner/tensor_image.hpp>

#include <torch/torch.h>

#include <stdexcept>

MPIFY_BEGIN_NAMESPACE
namespace learner {

Image image_from_tensor(const at::Tensor& image) {
    if (image.dim() < 2) throw std::invalid_argument("image_from_tensor: needs at least 2 dimensions (height, width)");
    at::Tensor plane = image.detach().to(torch::kCPU, torch::kFloat);
    while (plane.dim() > 2) plane = plane[0];
    const float low = plane.min().item<float>(), high = plane.max().item<float>();
    const at::Tensor scaled = high > low ? (plane - low) / (high - low) : torch::zeros_like(plane);
    const at::Tensor bytes = (scaled * 255.0f).round().to(torch::kUInt8).contiguous();
    Image out;
    out.height = static_cast<int>(plane.size(0));
    out.width = static_cast<int>(plane.size(1));
    out.pixels.assign(bytes.data_ptr<std::uint8_t>(), bytes.data_ptr<std::uint8_t>() + bytes.numel());
    return out;
}

}  // namespace learner
MPIFY_END_NAMESPACE
