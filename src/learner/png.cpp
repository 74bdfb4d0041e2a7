// PNG and base64 encoding, just enough for grayscale images: one IHDR, one IDAT
// compressed with zlib, one IEND.
#include <mpify/learner/pictures.hpp>

#include <zlib.h>

#include <stdexcept>

MPIFY_BEGIN_NAMESPACE
namespace learner {
namespace {

void append_big_endian(std::string& out, std::uint32_t value) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xff));
}

void append_chunk(std::string& png, const char type[4], const std::string& data) {
    append_big_endian(png, static_cast<std::uint32_t>(data.size()));
    const std::string typed = std::string(type, 4) + data;
    png += typed;
    append_big_endian(png, static_cast<std::uint32_t>(::crc32(0, reinterpret_cast<const Bytef*>(typed.data()),
                                                              static_cast<uInt>(typed.size()))));
}

}  // namespace

std::string encode_png(const Image& image) {
    if (image.width <= 0 || image.height <= 0 ||
        image.pixels.size() != static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.height))
        throw std::invalid_argument("encode_png: an image of " + std::to_string(image.width) + "x" +
                                    std::to_string(image.height) + " needs that many pixels, not " +
                                    std::to_string(image.pixels.size()));
    // Each row starts with its filter type: 0, none.
    std::string raw;
    raw.reserve(image.pixels.size() + static_cast<std::size_t>(image.height));
    for (int y = 0; y < image.height; ++y) {
        raw.push_back('\0');
        raw.append(reinterpret_cast<const char*>(image.pixels.data()) + static_cast<std::size_t>(y) * image.width,
                   static_cast<std::size_t>(image.width));
    }
    uLongf packed_size = ::compressBound(static_cast<uLong>(raw.size()));
    std::string packed(packed_size, '\0');
    if (::compress2(reinterpret_cast<Bytef*>(packed.data()), &packed_size, reinterpret_cast<const Bytef*>(raw.data()),
                    static_cast<uLong>(raw.size()), Z_BEST_COMPRESSION) != Z_OK)
        throw std::runtime_error("encode_png: zlib could not compress the image");
    packed.resize(packed_size);

    std::string header;
    append_big_endian(header, static_cast<std::uint32_t>(image.width));
    append_big_endian(header, static_cast<std::uint32_t>(image.height));
    header += std::string("\x08\x00\x00\x00\x00", 5);  // 8 bits, grayscale, deflate, no filter set, no interlace

    std::string png("\x89PNG\r\n\x1a\n", 8);
    append_chunk(png, "IHDR", header);
    append_chunk(png, "IDAT", packed);
    append_chunk(png, "IEND", "");
    return png;
}

std::string base64(const std::string& bytes) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const std::uint32_t n = static_cast<std::uint8_t>(bytes[i]) << 16 |
                                static_cast<std::uint8_t>(bytes[i + 1]) << 8 | static_cast<std::uint8_t>(bytes[i + 2]);
        for (int shift = 18; shift >= 0; shift -= 6) out.push_back(alphabet[(n >> shift) & 63]);
    }
    if (i < bytes.size()) {
        std::uint32_t n = static_cast<std::uint8_t>(bytes[i]) << 16;
        if (i + 1 < bytes.size()) n |= static_cast<std::uint8_t>(bytes[i + 1]) << 8;
        out.push_back(alphabet[(n >> 18) & 63]);
        out.push_back(alphabet[(n >> 12) & 63]);
        out.push_back(i + 1 < bytes.size() ? alphabet[(n >> 6) & 63] : '=');
        out.push_back('=');
    }
    return out;
}

}  // namespace learner
MPIFY_END_NAMESPACE
