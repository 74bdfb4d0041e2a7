#include "learner/checksum_frame.hpp"

#include "common/byte_codec.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

MPIFY_BEGIN_NAMESPACE
namespace learner {
namespace {

constexpr std::string_view magic = "MPFYCKPT";
constexpr std::size_t header_size = frame_header_size;

}  // namespace

void FrameBuilder::add(const char* data, std::size_t n) {
    crc_ = static_cast<std::uint32_t>(::crc32_z(crc_, reinterpret_cast<const Bytef*>(data), n));
    length_ += n;
}

std::string FrameBuilder::header() const {
    detail::ByteWriter numbers;
    numbers.u64(length_);
    numbers.u32(crc_);
    return std::string(magic) + numbers.take();
}

std::string framed(const std::string& payload) {
    FrameBuilder frame;
    frame.add(payload.data(), payload.size());
    std::string out = frame.header();
    out.reserve(header_size + payload.size());
    out.append(payload);
    return out;
}

PayloadSpan checked_payload(const std::string& path, std::uint64_t size, const ReadAt& read_at) {
    const auto bad = [&](const std::string& what) { return std::runtime_error("checkpoint " + path + ": " + what); };
    std::string header(header_size, '\0');
    const std::size_t got = read_at(0, header.data(), header.size());
    header.resize(got);
    if (std::string_view(header).substr(0, magic.size()) != magic) return PayloadSpan{0, size, std::nullopt};
    if (got < header_size) throw bad("it is truncated (its frame is cut short)");
    detail::ByteReader<std::runtime_error> numbers(std::string_view(header).substr(magic.size()),
                                                   "a checkpoint's frame");
    const std::uint64_t length = numbers.u64("the content's length");
    const std::uint32_t checksum = numbers.u32("the content's checksum");
    const std::uint64_t present = size - header_size;
    if (present != length)
        throw bad("it is " + std::string(present < length ? "truncated" : "longer than written") + " (" +
                  std::to_string(present) + " bytes of content where " + std::to_string(length) + " were written)");
    std::string piece(std::min<std::uint64_t>(length, std::uint64_t(1) << 20), '\0');
    FrameBuilder content;
    for (std::uint64_t done = 0; done < length;) {
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(piece.size(), length - done));
        const std::size_t n = read_at(header_size + done, piece.data(), want);
        if (n == 0) throw bad("it is truncated (it shrank while it was read)");
        content.add(piece.data(), n);
        done += n;
    }
    if (content.checksum() != checksum)
        throw bad("its checksum does not match its content: it is damaged (a bit changed on disk or on its way)");
    return PayloadSpan{header_size, length, checksum};
}

}  // namespace learner
MPIFY_END_NAMESPACE
