// The Learner on a GPU (ctest label `gpu`, in mpify_gpu_tests where the Learner is built):
// its default device, float32, float16 with the loss scaler and bfloat16 training to the
// same accuracy, predictions back on the CPU, a checkpoint of CUDA tensors read back.
#include <mpify/learner/learner.hpp>

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>

using namespace mpify::learner;

namespace {

// n points (2 features) of 3 classes around three centres, drawn from `seed`, on the CPU.
DataSet three_blobs(std::int64_t n, std::uint64_t seed) {
    auto gen = at::detail::createCPUGenerator(seed);
    const at::Tensor labels = torch::randint(0, 3, {n}, gen, torch::kLong);
    const at::Tensor centres = torch::tensor({{0.0f, 1.0f}, {1.0f, -0.5f}, {-1.0f, -0.5f}});
    return {centres.index_select(0, labels) + 0.6 * torch::randn({n, 2}, gen), labels};
}

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& labels) {
    return torch::nn::functional::cross_entropy(logits, labels);
}

std::unique_ptr<Learner> classifier(Precision precision) {
    torch::manual_seed(4);
    LearnerOptions options;
    options.max_batches = 0;
    options.precision = precision;
    options.scaler.growth_interval = 4;
    auto model = torch::nn::Sequential(torch::nn::Linear(2, 32), torch::nn::ReLU(), torch::nn::Linear(32, 3));
    return std::make_unique<Learner>(DataLoaders{three_blobs(2000, 1), three_blobs(1000, 2), 64, 7}, model.ptr(),
                                     cross_entropy, std::vector<Metric>{accuracy()}, options);
}

}  // namespace

TEST_CASE("the Learner trains on GPU 0 in float32, float16 with its scaler and bfloat16 alike", "[gpu]") {
    auto full = classifier(Precision::float32);
    CHECK(full->device() == c10::Device(c10::kCUDA, 0));
    const double full_accuracy = full->fit(3, 0.01).final("accuracy");
    const Predictions predictions = full->get_preds();
    CHECK(predictions.outputs.device().is_cpu());
    CHECK(predictions.outputs.size(0) == 1000);

    auto half = classifier(Precision::float16);
    const History half_history = half->fit(3, 0.01);
    CHECK(half->scaler().is_enabled());
    CHECK(half->scaler().get_scale() > 0);
    CHECK(std::isfinite(half_history.epochs.back().train_loss));
    auto brain = classifier(Precision::bfloat16);
    const double brain_accuracy = brain->fit(3, 0.01).final("accuracy");
    INFO("accuracy: float32 " << full_accuracy << ", float16 " << half_history.final("accuracy") << ", bfloat16 "
                              << brain_accuracy);
    CHECK(full_accuracy > 0.8);
    CHECK(std::abs(half_history.final("accuracy") - full_accuracy) <= 0.01);
    CHECK(std::abs(brain_accuracy - full_accuracy) <= 0.02);

    // A checkpoint of CUDA parameters and optimizer state, and the scaler's, read back.
    const std::string path =
        (std::filesystem::temp_directory_path() / ("mpify_gpu_learner_" + std::to_string(::getpid()) + ".pt")).string();
    half->save(path);
    auto again = classifier(Precision::float16);
    again->load(path);
    std::remove(path.c_str());
    CHECK(again->scaler().get_scale() == half->scaler().get_scale());
    const at::Tensor inputs = three_blobs(10, 3).inputs;
    CHECK(again->predict(inputs).equal(half->predict(inputs)));
    again->fit(1, 0.01);  // the optimizer's state is on the GPU with the parameters
}
