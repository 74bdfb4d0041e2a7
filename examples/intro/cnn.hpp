#pragma once
// The intro example's network, conv32 - conv64 - fc128 (docs/examples.md); the DDP
// benchmark trains it too (benchmarks/README.md calls it the intro CNN).
#include <torch/torch.h>

namespace mpify_examples {
namespace intro {

/// Two conv + max-pool blocks and two linear layers: 28 x 28 images to 10 logits.
struct Cnn : torch::nn::Module {
    Cnn()
        : conv1(register_module("conv1", torch::nn::Conv2d(1, 32, 3))),
          conv2(register_module("conv2", torch::nn::Conv2d(32, 64, 3))),
          fc1(register_module("fc1", torch::nn::Linear(64 * 5 * 5, 128))),
          fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}
    at::Tensor forward(const at::Tensor& input) {
        at::Tensor x = torch::max_pool2d(torch::relu(conv1(input)), 2);  // 13 x 13
        x = torch::max_pool2d(torch::relu(conv2(x)), 2);                 // 5 x 5
        return fc2(torch::relu(fc1(x.flatten(1))));
    }
    torch::nn::Conv2d conv1, conv2;
    torch::nn::Linear fc1, fc2;
};

}  // namespace intro
}  // namespace mpify_examples
