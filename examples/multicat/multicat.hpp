#pragma once
// Example 2, "multicat": multi-label classification (fastai lesson 6 style) on real
// Fashion-MNIST images. Each sample is two images side by side; its labels are the
// set of classes present (one class when both images share it). Sigmoid outputs, a
// threshold decides each label. Free of LibTorch, like intro.hpp.
#include <mpify/learner/history.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mpify_examples {
namespace multicat {

/// What to train.
struct Config {
    int epochs = 2;
    double max_lr = 5e-3;
    std::int64_t batch_size = 128;     ///< per rank
    std::int64_t train_pairs = 60000;  ///< pairs built from the training images (at most 60000)
    double threshold = 0.5;            ///< a label is predicted when its sigmoid exceeds this
    std::uint64_t seed = 42;
    std::string csv;                   ///< per-epoch metrics from rank 0; empty: none

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & epochs & max_lr & batch_size & train_pairs & threshold & seed & csv;
    }
};

/// One test pair: the classes present and the classes the model saw.
struct Prediction {
    std::vector<int> labels;
    std::vector<int> predicted;

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & labels & predicted;
    }
};

/// What train returns: the history and the predictions the first 8 test pairs.
using Result = mpify::learner::TrainingResult<Prediction>;

/// Trains the multi-label CNN, alone or in every rank of mpify::in_ddp.
Result train(Config config);

/// accuracy_multi the example promises after 2 epochs.
constexpr double target_accuracy_multi = 0.93;

}  // namespace multicat
}  // namespace mpify_examples
