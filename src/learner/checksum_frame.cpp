#include "learner/checksum_frame.hpp"

#include "common/byte_codec.hpp"

#include <zlib.h>

#include <cstdint>
#include <stdexcept>

MPIFY_BEGIN_NAMESPACE
namespace learner {
namespace {

constexpr std::string_view magic = "MPFYCKPT";
constexpr std::size_t header_size = 8 + 8 + 4;  // magic, length, CRC-32

std::uint32_t crc_of(std::string_view bytes) {
    return static_cast<std::uint32_t>(::crc32_z(::crc32_z(0, nullptr, 0), reinterpret_cast<const Bytef*>(bytes.data()),
                                                bytes.size()));
}

}  // namespace

std::string framed(const std::string& payload) {
    detail::ByteWriter numbers;
    numbers.u64(payload.size());
    numbers.u32(crc_of(payload));
    std::string out;
    out.reserve(header_size + payload.size());
    out.append(magic);
    out.append(numbers.take());
    out.append(payload);
    return out;
}

std::string_view unframed(const std::string& path, const std::string& bytes) {
    const std::string_view all(bytes);
    if (all.substr(0, magic.size()) != magic) return all;
    const auto bad = [&](const std::string& what) { return std::runtime_error("checkpoint " + path + ": " + what); };
    if (all.size() < header_size) throw bad("it is truncated (its frame is cut short)");
    detail::ByteReader<std::runtime_error> numbers(all.substr(magic.size(), header_size - magic.size()),
                                                   "a checkpoint's frame");
    const std::uint64_t length = numbers.u64("the content's length");
    const std::uint32_t checksum = numbers.u32("the content's checksum");
    const std::string_view payload = all.substr(header_size);
    if (payload.size() != length)
        throw bad("it is " + std::string(payload.size() < length ? "truncated" : "longer than written") + " (" +
                  std::to_string(payload.size()) + " bytes of content where " + std::to_string(length) +
                  " were written)");
    if (crc_of(payload) != checksum)
        throw bad("its checksum does not match its content: it is damaged (a bit changed on disk or on its way)");
    return payload;
}

}  // namespace learner
MPIFY_END_NAMESPACE
