#pragma once
// The frame around a checkpoint's (or an export's) bytes on disk: a magic, the payload's
// length and its CRC-32, then the payload. LibTorch's archive reader checks no checksum,
// so without it a flipped bit in a parameter loads as a wrong weight; with it a damaged
// or cut file is found before anything in it is used.
#include <mpify/abi.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// The bytes of a frame before its payload.
constexpr std::size_t frame_header_size = 8 + 8 + 4;  // magic, length, CRC-32

/// A payload's frame, computed as its bytes go by in any number of pieces.
class FrameBuilder {
public:
    /// The next `n` bytes of the payload.
    void add(const char* data, std::size_t n);
    /// The frame's header (frame_header_size bytes) for the bytes added so far.
    std::string header() const;
    /// The CRC-32 of the bytes added so far.
    std::uint32_t checksum() const { return crc_; }

private:
    std::uint64_t length_ = 0;
    std::uint32_t crc_ = 0;
};

/// `payload` in its frame.
std::string framed(const std::string& payload);

/// Reads up to `n` bytes at `offset` into `into`; returns how many (fewer only at the end).
using ReadAt = std::function<std::size_t(std::uint64_t offset, char* into, std::size_t n)>;

/// Where a file's payload lies, and its CRC-32.
struct PayloadSpan {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    std::optional<std::uint32_t> checksum;  ///< nullopt: a file of format 1, written before frames
};

/// The payload of the `size` framed bytes that `read_at` reads (of file `path`, for
/// messages), once its length and checksum agree with the frame, read in pieces of a
/// MiB; the whole when the bytes carry no frame (format 1). Throws std::runtime_error
/// naming `path` and what is wrong when they do not agree.
PayloadSpan checked_payload(const std::string& path, std::uint64_t size, const ReadAt& read_at);

}  // namespace learner
MPIFY_END_NAMESPACE
