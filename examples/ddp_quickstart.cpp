// Data-parallel training in one call: a small regression model trained by 2 processes,
// each on its own shard of every epoch, gradients averaged during backward.
#include <mpify/torch.hpp>
#include <torch/torch.h>

#include <iostream>

struct Net : torch::nn::Module {
    Net()
        : hidden(register_module("hidden", torch::nn::Linear(8, 32))),
          out(register_module("out", torch::nn::Linear(32, 1))) {}
    at::Tensor forward(const at::Tensor& x) { return out(torch::relu(hidden(x))); }
    torch::nn::Linear hidden, out;
};

// Runs on every rank, inside the process group in_ddp created.
double train(int epochs) {
    torch::manual_seed(42);                 // the same data set on every rank
    const at::Tensor x = torch::randn({1024, 8});
    const at::Tensor y = torch::tanh(x.matmul(torch::linspace(-1, 1, 8).reshape({8, 1})));

    auto model = std::make_shared<Net>();
    mpify::DistributedDataParallel ddp_model(model);  // rank 0's parameters everywhere
    torch::optim::Adam optimizer(ddp_model.parameters(), torch::optim::AdamOptions(1e-2));
    mpify::DistributedSampler sampler(x.size(0), mpify::ddp::rank(), mpify::ddp::world_size());

    for (int epoch = 0; epoch < epochs; ++epoch) {
        sampler.set_epoch(epoch);
        const at::Tensor shard = torch::tensor(sampler.indices());
        for (std::int64_t start = 0; start < shard.size(0); start += 64) {
            const at::Tensor rows = shard.narrow(0, start, std::min<std::int64_t>(64, shard.size(0) - start));
            optimizer.zero_grad();
            torch::mse_loss(ddp_model(x.index_select(0, rows)), y.index_select(0, rows)).backward();
            optimizer.step();               // gradients are already averaged over the ranks
        }
    }
    at::Tensor loss = torch::mse_loss(model->forward(x), y).detach();
    mpify::ddp::all_reduce(loss);           // the same model everywhere: the mean is the loss
    return loss.item<double>() / mpify::ddp::world_size();
}
MPIFY_REGISTER(train);

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const double loss = mpify::in_ddp(2, train, 20);  // 2 processes, the caller is rank 0
    std::cout << "loss after 20 epochs on 2 processes: " << loss << std::endl;
    return loss < 0.05 ? 0 : 1;
}
