// The Learner's device and mixed precision: bfloat16 and float16 forwards, float16's loss
// scaler in the training loop and in checkpoints, and the devices it accepts. Run on the
// CPU (float16 autocast there needs LibTorch 2.x); tests/gpu/ has the same on a GPU.
#include <mpify/learner/learner.hpp>

#include "blob_data.hpp"
#include "scratch_folder.hpp"

#include "compat/torch_compat.hpp"  // mpify's own, for the two LibTorch generations
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

using namespace mpify::learner;
using mpify_examples::testing::blobs;
using mpify_examples::testing::cross_entropy;
using mpify_examples::testing::ScratchFolder;

namespace {

// What each training batch did to the model: its loss, the scale after its step, and
// whether the weights moved.
struct StepRecord {
    double loss;
    double scale;
    bool moved;
};

class StepRecorder : public Callback {
public:
    explicit StepRecorder(std::shared_ptr<torch::nn::LinearImpl> model)
        : model_(std::move(model)), before_(model_->weight.detach().clone()) {}
    void after_batch(const Learner& learner, std::int64_t /*batch*/, double loss) override {
        const at::Tensor now = model_->weight.detach().cpu();
        steps.push_back({loss, learner.scaler().get_scale(), !now.equal(before_)});
        before_ = now.clone();
    }
    std::vector<StepRecord> steps;

private:
    std::shared_ptr<torch::nn::LinearImpl> model_;
    at::Tensor before_;
};

LearnerOptions precision_options(Precision precision) {
    LearnerOptions options;
    options.max_batches = 0;
    options.precision = precision;
    return options;
}

}  // namespace

TEST_CASE("precision = bfloat16 trains a classifier to the accuracy of float32", "[learner][precision]") {
    const auto fit = [](Precision precision) {
        torch::manual_seed(4);
        Learner learn({blobs(600, 1), blobs(1000, 2), 32, 7}, std::make_shared<torch::nn::LinearImpl>(2, 3),
                      cross_entropy, {accuracy()}, precision_options(precision));
        return learn.fit(3, 0.05);
    };
    const History full = fit(Precision::float32), half = fit(Precision::bfloat16);
    INFO("accuracy: float32 " << full.final("accuracy") << ", bfloat16 " << half.final("accuracy"));
    CHECK(std::abs(full.final("accuracy") - half.final("accuracy")) <= 0.005);
    CHECK(full.batch_losses != half.batch_losses);                  // the forward did run in bfloat16
    CHECK(!mpify::detail::autocast_enabled(c10::DeviceType::CPU));  // and autocast is off again
}

TEST_CASE("the Learner trains on the CPU where no GPU is seen, and refuses a device it cannot use",
          "[learner][precision]") {
    const auto make = [](LearnerOptions options) {
        return std::make_unique<Learner>(DataLoaders{blobs(40, 1), blobs(8, 2), 8, 7},
                                         std::make_shared<torch::nn::LinearImpl>(2, 3), cross_entropy,
                                         std::vector<Metric>{}, options);
    };
    if (!torch::cuda::is_available()) CHECK(make({})->device() == c10::Device(c10::kCPU));
    CHECK(!make({})->scaler().is_enabled());  // float32: no scaling, a scale of 1
    CHECK(make({})->scaler().get_scale() == 1.0);

    LearnerOptions on_gpu;
    on_gpu.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(torch::cuda::device_count()));
    CHECK_THROWS_WITH(make(on_gpu), Catch::Contains("LearnerOptions::device is cuda:") &&
                                        Catch::Contains("but this process sees") &&
                                        Catch::Contains("choose a device it sees, or the CPU"));
    LearnerOptions on_meta;
    on_meta.device = c10::Device(c10::kMeta);
    CHECK_THROWS_WITH(make(on_meta), Catch::Contains("the Learner trains on the CPU or on CUDA"));
}

#if MPIFY_CPU_AUTOCAST_HAS_FLOAT16

TEST_CASE("precision = float16 scales the loss, trains to float32's accuracy, and skips a step whose loss is NaN",
          "[learner][precision]") {
    DataSet train = blobs(600, 1);
    const auto fit = [&](Precision precision) {
        torch::manual_seed(4);
        auto model = std::make_shared<torch::nn::LinearImpl>(2, 3);
        LearnerOptions options = precision_options(precision);
        options.scaler.growth_interval = 4;  // the scale grows within the run
        Learner learn({train, blobs(1000, 2), 32, 7}, model, cross_entropy, {accuracy()}, options);
        auto record = std::make_shared<StepRecorder>(model);
        learn.add_callback(record);
        const History history = learn.fit(3, 0.05);
        for (const at::Tensor& p : model->parameters()) CHECK(at::isfinite(p).all().item<bool>());
        return std::make_pair(history, record);
    };
    const History full = fit(Precision::float32).first;
    const auto [half, half_steps] = fit(Precision::float16);
    INFO("accuracy: float32 " << full.final("accuracy") << ", float16 " << half.final("accuracy"));
    CHECK(std::abs(full.final("accuracy") - half.final("accuracy")) <= 0.01);
    CHECK(full.batch_losses != half.batch_losses);  // the forward did run in float16
    // The scale: 65536 at the start, doubled after every 4 steps in a row that stepped,
    // halved after one that did not.
    double expected = 65536.0;
    int in_a_row = 0;
    for (const StepRecord& step : half_steps->steps) {
        if (step.moved) {
            if (++in_a_row == 4) {
                expected *= 2;
                in_a_row = 0;
            }
        } else {
            expected /= 2;
            in_a_row = 0;
        }
        CHECK(step.scale == expected);
    }
    CHECK(half_steps->steps.back().scale > 65536.0);

    // One sample made NaN: the batch that holds it has a NaN loss, its step is skipped
    // (the weights stay as they were) and the scale backs off; training goes on.
    train.inputs[123][0] = std::nan("");
    const auto [poisoned, poisoned_steps] = fit(Precision::float16);
    int skipped_nan = 0;
    double scale_before = 65536.0;
    for (const StepRecord& step : poisoned_steps->steps) {
        if (std::isnan(step.loss)) {
            ++skipped_nan;
            CHECK(!step.moved);
            CHECK(step.scale == scale_before / 2);
        }
        scale_before = step.scale;
    }
    CHECK(skipped_nan == 3);  // once an epoch
}

TEST_CASE("a float16 Learner's checkpoint keeps its scaler's state", "[learner][precision][checkpoint]") {
    ScratchFolder folder("precision_test", "scaler");
    const std::string path = (folder.path() / "fp16.pt").string();
    LearnerOptions options = precision_options(Precision::float16);
    options.scaler.growth_interval = 3;
    options.scaler.init_scale = 1024;
    torch::manual_seed(4);
    Learner trained({blobs(200, 1), blobs(50, 2), 16, 7}, std::make_shared<torch::nn::LinearImpl>(2, 3), cross_entropy,
                    {}, options);
    trained.fit(1, 0.05);
    trained.save(path);
    const double scale = trained.scaler().get_scale();
    const std::int64_t tracker = trained.scaler().growth_tracker();
    REQUIRE(scale != 1024.0);  // it moved: the file has something to keep
    CHECK(scale == 1024.0 * 16);  // 13 batches, none skipped: grown after 3, 6, 9 and 12
    CHECK(tracker == 1);

    options.scaler.init_scale = 8;  // the file's state wins over the settings
    Learner loaded({blobs(200, 1), blobs(50, 2), 16, 7}, std::make_shared<torch::nn::LinearImpl>(2, 3), cross_entropy,
                   {}, options);
    loaded.load(path);
    CHECK(loaded.scaler().get_scale() == scale);
    CHECK(loaded.scaler().growth_tracker() == tracker);
    CHECK(loaded.scaler().growth_interval() == 3);

    // A float32 Learner reads the same file (it has no scaler to load).
    Learner plain({blobs(200, 1), blobs(50, 2), 16, 7}, std::make_shared<torch::nn::LinearImpl>(2, 3), cross_entropy,
                  {}, precision_options(Precision::float32));
    plain.load(path);
    CHECK(plain.scaler().get_scale() == 1.0);
}

#else

TEST_CASE("precision = float16 on the CPU is refused where CPU autocast has no float16", "[learner][precision]") {
    CHECK_THROWS_WITH(Learner({blobs(40, 1), blobs(8, 2), 8, 7}, std::make_shared<torch::nn::LinearImpl>(2, 3),
                              cross_entropy, {}, precision_options(Precision::float16)),
                      Catch::Contains("float16 on the CPU needs LibTorch 2.x") &&
                          Catch::Contains("choose Precision::bfloat16"));
}

#endif
