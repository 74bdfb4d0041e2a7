#include "fashion_mnist.hpp"

#include <ATen/ATen.h>
#include <zlib.h>

#include <array>
#include <memory>
#include <stdexcept>
#include <vector>

namespace mpify_examples {
namespace {

// An IDX file: big-endian magic (0x0801 labels, 0x0803 images), dimensions, bytes.
std::vector<std::uint8_t> read_idx(const std::string& path, std::uint32_t magic, std::vector<std::int64_t>& dims) {
    std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
    if (!file) throw std::runtime_error("cannot open " + path + " (install the Debian package dataset-fashion-mnist)");
    auto read_u32 = [&] {
        std::array<unsigned char, 4> b{};
        if (gzread(file.get(), b.data(), 4) != 4) throw std::runtime_error(path + ": truncated header");
        return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
    };
    if (read_u32() != magic) throw std::runtime_error(path + ": not an IDX file of the expected kind");
    const int rank = static_cast<int>(magic & 0xff);
    std::int64_t count = 1;
    for (int i = 0; i < rank; ++i) {
        dims.push_back(read_u32());
        count *= dims.back();
    }
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(count));
    if (gzread(file.get(), bytes.data(), static_cast<unsigned>(bytes.size())) != static_cast<int>(bytes.size()))
        throw std::runtime_error(path + ": truncated data");
    return bytes;
}

}  // namespace

ImageSet load_fashion_mnist(bool train, std::int64_t limit, const std::string& dir) {
    const std::string prefix = dir + (train ? "/train" : "/t10k");
    std::vector<std::int64_t> image_dims, label_dims;
    std::vector<std::uint8_t> pixels = read_idx(prefix + "-images-idx3-ubyte.gz", 0x0803, image_dims);
    std::vector<std::uint8_t> labels = read_idx(prefix + "-labels-idx1-ubyte.gz", 0x0801, label_dims);
    std::int64_t n = image_dims.at(0);
    if (limit > 0 && limit < n) n = limit;
    ImageSet set;
    set.images = at::from_blob(pixels.data(), {image_dims[0], 1, image_dims[1], image_dims[2]}, at::kByte)
                     .narrow(0, 0, n)
                     .to(at::kFloat)
                     .div_(255.0)
                     .sub_(0.2860)  // the training set's mean and standard deviation
                     .div_(0.3530);
    set.labels = at::from_blob(labels.data(), {label_dims[0]}, at::kByte).narrow(0, 0, n).to(at::kLong);
    return set;
}

}  // namespace mpify_examples
