#pragma once
// Images as a training function hands them to a notebook: plain bytes, serializable,
// free of LibTorch.
#include <mpify/abi.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include <cstdint>
#include <string>
#include <vector>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// A grayscale image, row by row, 0 black .. 255 white.
struct Image {
    int width = 0;   ///< pixels per row
    int height = 0;  ///< rows
    std::vector<std::uint8_t> pixels;  ///< width * height values

    /// Boost.Serialization: what ranch and in_ddp send between ranks.
    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & width & height & pixels;
    }
};

/// An image with what it is and, for results, what the model said it is.
struct LabeledImage {
    Image image;            ///< the picture
    std::string label;      ///< the truth ("Trouser", or "Bag + Coat" for several labels)
    std::string predicted;  ///< the model's answer; empty in a batch

    /// Boost.Serialization: what ranch and in_ddp send between ranks.
    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & image & label & predicted;
    }
};

}  // namespace learner
MPIFY_END_NAMESPACE
