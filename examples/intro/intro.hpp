#pragma once
// Example 1, "intro": a small CNN learns Fashion-MNIST (fastai lesson 1 in spirit).
// Free of LibTorch: a notebook includes this, ranches train, and looks at the result.
#include <mpify/learner/history.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mpify_examples {
namespace intro {

/// The ten Fashion-MNIST classes, by label.
inline const std::vector<std::string> class_names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                     "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

/// What to train.
struct Config {
    int epochs = 2;
    double max_lr = 6e-3;           ///< peak of fit_one_cycle
    std::int64_t batch_size = 128;  ///< per rank
    std::uint64_t seed = 42;        ///< model initialization and shuffling
    std::string csv;                ///< where rank 0 writes per-epoch metrics; empty: nowhere
    /// LearnerOptions::checkpoint_dir: where the fit checkpoints, and resumes from; empty: nowhere.
    std::string checkpoint_dir;
    /// A demonstration of restarts (KillRankOnce): on a call's first attempt, rank
    /// `kill_rank` kills itself after batch `kill_batch` of epoch `kill_epoch`; -1: never.
    int kill_rank = -1;
    int kill_epoch = 1;
    std::int64_t kill_batch = 0;
    /// Train in mixed precision (LearnerOptions::precision = Precision::bfloat16).
    bool bfloat16 = false;

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & epochs & max_lr & batch_size & seed & csv & checkpoint_dir & kill_rank & kill_epoch & kill_batch &
            bfloat16;
    }
};

/// The model's answer for one test image.
struct Prediction {
    int label = 0;
    int predicted = 0;
    double confidence = 0;  ///< softmax probability of `predicted`

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & label & predicted & confidence;
    }
};

/// What train returns: the history and the predictions for the first 8 test images.
using Result = mpify::learner::TrainingResult<Prediction>;

/// Trains the CNN; alone in this process, or in every rank of mpify::in_ddp.
/// Registered with MPIFY_REGISTER in the examples library.
Result train(Config config);

/// Accuracy the example promises after 2 epochs, alone or with in_ddp.
constexpr double target_accuracy = 0.88;

/// How far below float32's accuracy training in bfloat16 may end (intro --compare-bfloat16).
constexpr double bfloat16_accuracy_tolerance = 0.005;

}  // namespace intro
}  // namespace mpify_examples
