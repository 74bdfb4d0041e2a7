#pragma once
// The resnet example's network: a stem and three residual blocks (8, 16, 32 channels;
// 28 x 28 down to 7 x 7), average pooling and one linear layer. Its norm type is a
// template parameter: LibTorch's typed members cannot be swapped after construction, so
// the model is built with torch::nn::BatchNorm2d alone and mpify::SyncBatchNorm2d in a group.
#include <torch/torch.h>

namespace mpify_examples {
namespace resnet {

/// Two 3 x 3 convolutions with norms, added to the input (through a 1 x 1 convolution and
/// a norm when the shape changes).
template <class Norm>
struct ResidualBlock : torch::nn::Module {
    ResidualBlock(std::int64_t in, std::int64_t out, std::int64_t stride)
        : conv1(register_module(
              "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)))),
          norm1(register_module("norm1", Norm(out))),
          conv2(register_module("conv2",
                                torch::nn::Conv2d(torch::nn::Conv2dOptions(out, out, 3).padding(1).bias(false)))),
          norm2(register_module("norm2", Norm(out))) {
        if (stride != 1 || in != out) {
            shortcut_conv = register_module(
                "shortcut_conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
            shortcut_norm = register_module("shortcut_norm", Norm(out));
        }
    }
    at::Tensor forward(const at::Tensor& x) {
        const at::Tensor path = norm2(conv2(torch::relu(norm1(conv1(x)))));
        return torch::relu(path + (shortcut_conv ? shortcut_norm(shortcut_conv(x)) : x));
    }
    torch::nn::Conv2d conv1;
    Norm norm1;
    torch::nn::Conv2d conv2;
    Norm norm2;
    torch::nn::Conv2d shortcut_conv{nullptr};  ///< null while the shape stays
    Norm shortcut_norm{nullptr};
};

/// 1 x 28 x 28 images to 10 logits.
template <class Norm>
struct SmallResNet : torch::nn::Module {
    SmallResNet()
        : stem(register_module("stem", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3).padding(1).bias(false)))),
          stem_norm(register_module("stem_norm", Norm(8))),
          block1(register_module("block1", std::make_shared<ResidualBlock<Norm>>(8, 8, 1))),
          block2(register_module("block2", std::make_shared<ResidualBlock<Norm>>(8, 16, 2))),
          block3(register_module("block3", std::make_shared<ResidualBlock<Norm>>(16, 32, 2))),
          head(register_module("head", torch::nn::Linear(32, 10))) {}
    at::Tensor forward(const at::Tensor& input) {
        at::Tensor x = torch::relu(stem_norm(stem(input)));
        x = block3->forward(block2->forward(block1->forward(x)));   // 32 x 7 x 7
        return head(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
    }
    torch::nn::Conv2d stem;
    Norm stem_norm;
    std::shared_ptr<ResidualBlock<Norm>> block1, block2, block3;
    torch::nn::Linear head;
};

}  // namespace resnet
}  // namespace mpify_examples
