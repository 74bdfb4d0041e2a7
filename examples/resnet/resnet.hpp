#pragma once
// Example 4, "resnet": a small ResNet with BatchNorm learns Fashion-MNIST. Under in_ddp its
// norms are mpify::SyncBatchNorm2d, so every rank normalizes with the whole global batch;
// the learning rate comes from lr_find; the result carries the finder's curve, the
// confusion matrix and the worst predictions. Free of LibTorch: a notebook includes this.
#include <mpify/learner/confusion.hpp>
#include <mpify/learner/history.hpp>
#include <mpify/learner/lr_finder.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mpify_examples {
namespace resnet {

/// What to train.
struct Config {
    int epochs = 1;
    std::int64_t batch_size = 128;  ///< per rank
    std::uint64_t seed = 42;        ///< model initialization and shuffling
    /// Peak of fit_one_cycle; 0: lr_find's "minimum" suggestion (the finder runs either way;
    /// its "valley" is more cautious, and undertrains in one epoch).
    double max_lr = 0;
    int finder_iterations = 60;  ///< lr_find's steps at most
    std::string csv;             ///< where rank 0 writes per-epoch metrics; empty: nowhere

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & epochs & batch_size & seed & max_lr & finder_iterations & csv;
    }
};

/// What train returns (every rank has the same; rank 0's comes back from in_ddp).
struct Result {
    mpify::learner::History history;
    mpify::learner::LrFinderResult finder;              ///< the sweep before training
    double finder_seconds = 0;          ///< how long lr_find took
    double max_lr = 0;                  ///< the peak rate the fit used
    std::int64_t sync_norms = 0;        ///< SyncBatchNorm2d layers in the model (0 alone: BatchNorm2d)
    mpify::learner::ConfusionMatrix confusion;          ///< on the test set
    std::vector<mpify::learner::TopLoss> top_losses;    ///< the 9 test images of largest loss, with their pictures

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & history & finder & finder_seconds & max_lr & sync_norms & confusion & top_losses;
    }
};

/// Finds a rate, trains, interprets; alone in this process, or in every rank of in_ddp.
/// Registered with MPIFY_REGISTER in the examples library.
Result train(Config config);

/// Accuracy the example promises after its epoch, alone or with in_ddp.
constexpr double target_accuracy = 0.85;

}  // namespace resnet
}  // namespace mpify_examples
