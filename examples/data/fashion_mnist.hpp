#pragma once
// Fashion-MNIST from Debian's dataset-fashion-mnist: the gzipped IDX files under
// /usr/share/datasets/fashion-mnist, read straight from the .gz files.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace mpify_examples {

/// Where dataset-fashion-mnist installs the files.
inline const char* fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";

struct ImageSet {
    at::Tensor images;  ///< N x 1 x 28 x 28 float, scaled to [0, 1] then normalized
    at::Tensor labels;  ///< N int64 class indices
};

/// The training (60000) or test (10000) split; `limit` > 0 keeps only the first `limit`.
/// Throws std::runtime_error naming the file and the package to install when missing.
ImageSet load_fashion_mnist(bool train, std::int64_t limit = 0, const std::string& dir = fashion_mnist_dir);

}  // namespace mpify_examples
