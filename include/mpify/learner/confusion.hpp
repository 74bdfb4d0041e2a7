#pragma once
// What a classifier got wrong, as plain data (free of LibTorch: a notebook gets these
// from a ranch'ed function and draws them with pictures.hpp). ClassificationInterpretation (interpretation.hpp) makes them.
#include <mpify/abi.hpp>
#include <mpify/learner/image.hpp>

#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include <cstdint>
#include <string>
#include <vector>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// A pair of classes the model mixed up, and how often.
struct Confusion {
    std::string actual;  ///< the true class
    std::string predicted;  ///< the class the model answered
    std::int64_t count = 0;  ///< items of `actual` predicted as `predicted`
};

/// How often each class (row: the truth) was predicted as each class (column).
struct ConfusionMatrix {
    std::vector<std::string> class_names;  ///< the rows' and columns' classes, by index
    std::vector<std::vector<std::int64_t>> counts;  ///< counts[actual][predicted]

    /// The off-diagonal cells with at least `min_count` items, most frequent first
    /// (fastai's most_confused).
    std::vector<Confusion> most_confused(std::int64_t min_count = 1) const;
    /// The fraction of items on the diagonal.
    double accuracy() const;

    /// Boost.Serialization: what ranch and in_ddp send between ranks.
    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & class_names & counts;
    }
};

/// One of the items the model was most wrong about (fastai's top_losses).
struct TopLoss {
    std::int64_t index = 0;  ///< in the data set
    std::string actual;  ///< the true class
    std::string predicted;  ///< the model's answer
    double loss = 0;  ///< the item's loss
    double probability = 0;  ///< the probability the model gave its answer
    Image image;  ///< the input, when it is an image and was asked for

    /// Boost.Serialization: what ranch and in_ddp send between ranks.
    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & index & actual & predicted & loss & probability & image;
    }
};

}  // namespace learner
MPIFY_END_NAMESPACE
