#pragma once
// What a training run returns: one record per epoch. Free of LibTorch, so a notebook can
// include it without paying LibTorch's compile time.
#include <mpify/abi.hpp>
#include <mpify/learner/image.hpp>

#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// One epoch's numbers, as its progress line shows them.
struct EpochRecord {
    int epoch = 0;               ///< 1-based
    std::int64_t batches = 0;    ///< training batches each rank ran
    double train_loss = 0;       ///< mean over every rank's training batches
    double valid_loss = 0;       ///< mean over the whole validation set
    std::vector<double> metrics; ///< in the order of History::metric_names
    double seconds = 0;          ///< wall time of training plus validation

    /// Boost.Serialization: what ranch and in_ddp send between ranks.
    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & epoch & batches & train_loss & valid_loss & metrics & seconds;
    }
};

/// The records of one fit, in epoch order.
struct History {
    std::vector<std::string> metric_names;  ///< the Learner's metrics, in order (accuracy, ...)
    std::vector<EpochRecord> epochs;        ///< one per epoch trained, in order
    int world_size = 1;  ///< processes that trained
    double seconds = 0;  ///< wall time of the whole fit
    std::vector<double> batch_losses;  ///< training loss of every batch, in order (this rank's)

    /// The last epoch's value of metric `name` (or "train_loss" / "valid_loss").
    /// Throws std::out_of_range naming the metric when there is no such metric or epoch.
    double final(const std::string& name) const {
        if (epochs.empty()) throw std::out_of_range("History::final(\"" + name + "\"): no epoch was recorded");
        const EpochRecord& last = epochs.back();
        if (name == "train_loss") return last.train_loss;
        if (name == "valid_loss") return last.valid_loss;
        for (std::size_t i = 0; i < metric_names.size(); ++i)
            if (metric_names[i] == name) return last.metrics.at(i);
        std::string known = "train_loss, valid_loss";
        for (const std::string& m : metric_names) known += ", " + m;
        throw std::out_of_range("History::final(\"" + name + "\"): no such metric (recorded: " + known + ")");
    }

    /// Boost.Serialization: what ranch and in_ddp send between ranks.
    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & metric_names & epochs & world_size & seconds & batch_losses;
    }
};

/// What a training function can return from its ranks (rank 0's, under in_ddp): the
/// history, the model's answers for a few samples (`Prediction` is any serializable
/// type of yours), and, for images, the pictures' material (pictures.hpp draws them).
/// The examples' training functions return one.
template <class Prediction>
struct TrainingResult {
    History history;                      ///< the fit's
    std::vector<Prediction> predictions;  ///< answers for a few samples, as the function chose them
    std::vector<LabeledImage> batch;    ///< the first training samples, with their labels
    std::vector<LabeledImage> results;  ///< the first test samples, with the model's answers

    /// Boost.Serialization: what ranch and in_ddp send between ranks.
    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & history & predictions & batch & results;
    }
};

}  // namespace learner
MPIFY_END_NAMESPACE
