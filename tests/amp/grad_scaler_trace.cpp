// One training run with mpify::GradScaler, printed step by step for
// grad_scaler_reference_test.py, which runs the same steps with Python's
// torch.amp.GradScaler and compares the two prints line by line. The scenario is in
// both files; a change to one is a change to the other.
#include <mpify/grad_scaler.hpp>

#include <torch/torch.h>

#include <cstdio>
#include <limits>
#include <sstream>
#include <string>

namespace {

void print_step(int step, bool stepped, const mpify::GradScaler& scaler, const std::vector<at::Tensor>& parameters) {
    std::printf("step %d stepped %d scale %.9g tracker %lld params", step, stepped ? 1 : 0, scaler.get_scale(),
                static_cast<long long>(scaler.growth_tracker()));
    for (const auto& parameter : parameters) {
        const at::Tensor flat = parameter.detach().flatten().contiguous();
        for (int64_t i = 0; i < flat.numel(); ++i) std::printf(" %.9g", static_cast<double>(flat[i].item<float>()));
    }
    std::printf("\n");
}

}  // namespace

int main() {
    std::printf("torch %d.%d\n", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR);
    torch::set_num_threads(1);  // as the Python side: the same order of every sum
    // Values exact in binary: both sides start from the same bits.
    at::Tensor w1 = (torch::arange(12, torch::kFloat).reshape({3, 4}) * 0.0625 - 0.375).requires_grad_();
    at::Tensor b1 = torch::zeros({3}).requires_grad_();
    at::Tensor w2 = torch::tensor({{0.25f, -0.125f, 0.5f}}).requires_grad_();
    const at::Tensor x = (torch::arange(32, torch::kFloat).remainder(7) - 3).reshape({8, 4}) / 4;
    const at::Tensor y = torch::arange(8, torch::kFloat).reshape({8, 1}) / 8;
    const std::vector<at::Tensor> parameters{w1, b1, w2};
    torch::optim::SGD optimizer(parameters, torch::optim::SGDOptions(0.01).momentum(0.9));
    mpify::GradScaler scaler({/*init_scale=*/16384.0, /*growth_factor=*/2.0, /*backoff_factor=*/0.5,
                              /*growth_interval=*/3});

    for (int step = 0; step < 12; ++step) {
        optimizer.zero_grad();
        const at::Tensor out = torch::relu(x.matmul(w1.t()) + b1).matmul(w2.t());
        const at::Tensor loss = (out - y).pow(2).mean();
        scaler.scale(loss).backward();
        {
            torch::NoGradGuard no_grad;
            if (step == 3) w1.mutable_grad()[0][0] = std::numeric_limits<float>::infinity();
            if (step == 7) b1.mutable_grad()[1] = std::numeric_limits<float>::quiet_NaN();
        }
        if (step == 5) {  // true gradients, changed before the step
            scaler.unscale_(optimizer);
            torch::NoGradGuard no_grad;
            for (auto& parameter : parameters) parameter.mutable_grad().mul_(0.5);
        }
        const bool stepped = scaler.step(optimizer);
        if (step == 9) scaler.update(1024.0);
        else scaler.update();
        if (step == 10) {  // a checkpoint's round trip, into a scaler of other settings
            std::stringstream file;
            torch::save(scaler, file);
            mpify::GradScaler resumed;
            torch::load(resumed, file);
            scaler = std::move(resumed);
        }
        print_step(step, stepped, scaler, parameters);
    }
}
