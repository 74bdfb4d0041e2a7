#pragma once
// What a training run returns: one record per epoch. Free of LibTorch, so a notebook can
// include it (and the examples' headers) without paying LibTorch's compile time.
#include <visuals/image.hpp>

#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace mpify_examples {

/// One epoch's numbers, as its progress line shows them.
struct EpochRecord {
    int epoch = 0;               ///< 1-based
    std::int64_t batches = 0;    ///< training batches each rank ran
    double train_loss = 0;       ///< mean over every rank's training batches
    double valid_loss = 0;       ///< mean over the whole validation set
    std::vector<double> metrics; ///< in the order of History::metric_names
    double seconds = 0;          ///< wall time of training plus validation

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & epoch & batches & train_loss & valid_loss & metrics & seconds;
    }
};

/// The records of one fit, in epoch order.
struct History {
    std::vector<std::string> metric_names;
    std::vector<EpochRecord> epochs;
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

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & metric_names & epochs & world_size & seconds & batch_losses;
    }
};

/// What an example's training function returns (from rank 0 under in_ddp): the
/// history and the model's answers for the first few validation samples, and, for the
/// examples with images, pictures' material (visuals/pictures.hpp draws them).
template <class Prediction>
struct TrainingResult {
    History history;
    std::vector<Prediction> predictions;
    std::vector<LabeledImage> batch;    ///< the first training samples, with their labels
    std::vector<LabeledImage> results;  ///< the first test samples, with the model's answers

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & history & predictions & batch & results;
    }
};

}  // namespace mpify_examples
