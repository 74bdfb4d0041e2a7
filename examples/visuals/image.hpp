#pragma once
// Images as the examples hand them to a notebook: plain bytes, serializable, free of
// LibTorch.
#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mpify_examples {

/// A grayscale image, row by row, 0 black .. 255 white.
struct Image {
    int width = 0;
    int height = 0;
    std::vector<std::uint8_t> pixels;  ///< width * height values

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & width & height & pixels;
    }
};

/// An image with what it is and, for results, what the model said it is.
struct LabeledImage {
    Image image;
    std::string label;      ///< the truth ("Trouser", or "Bag + Coat" for several labels)
    std::string predicted;  ///< the model's answer; empty in a batch

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & image & label & predicted;
    }
};

}  // namespace mpify_examples
