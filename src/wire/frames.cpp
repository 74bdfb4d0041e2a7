#include "wire/frames.hpp"

#include "common/posix.hpp"
#include "wire/large_buffers.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

std::string frame_header(FrameType type, std::uint64_t payload_size) {
    std::string header(frame_header_size, '\0');
    header[0] = static_cast<char>(type);
    std::memcpy(&header[1], &payload_size, sizeof payload_size);
    return header;
}

namespace {

// Room for `more` bytes in `payload`, whose frame has `expected` bytes in all: grown
// geometrically as bytes arrive (64 MiB at first), never past what the frame announced.
void make_room(std::string& payload, std::size_t more, std::uint64_t expected) {
    const std::size_t needed = payload.size() + more;
    if (needed <= payload.capacity()) return;
    const std::uint64_t grown = std::max<std::uint64_t>({needed, payload.capacity() * 2ull, 64ull << 20});
    reserve_large(payload, static_cast<std::size_t>(std::min(grown, expected)));
}

}  // namespace

std::uint64_t checked_payload_size(const char* header) {
    const auto type = static_cast<unsigned char>(header[0]);
    if (type < static_cast<unsigned char>(FrameType::call) || type > static_cast<unsigned char>(FrameType::failure))
        throw std::runtime_error("mpify: a frame of unknown type " + std::to_string(type) + " on the channel");
    std::uint64_t size = 0;
    std::memcpy(&size, header + 1, sizeof size);
    if (size > max_frame_payload)
        throw std::runtime_error("mpify: a frame on the channel announces " + std::to_string(size) +
                                 " bytes; the limit is " + std::to_string(max_frame_payload));
    return size;
}

void FrameParser::append(const char* data, std::size_t size) {
    while (size > 0) {
        if (!in_payload_) {
            const std::size_t take = std::min(frame_header_size - header_.size(), size);
            header_.append(data, take);
            data += take;
            size -= take;
            if (header_.size() < frame_header_size) return;
            expected_ = checked_payload_size(header_.data());
            current_ = Frame{};
            current_.type = static_cast<FrameType>(header_[0]);
            header_.clear();
            in_payload_ = true;
        }
        const std::size_t take =
            static_cast<std::size_t>(std::min<std::uint64_t>(expected_ - current_.payload.size(), size));
        make_room(current_.payload, take, expected_);
        current_.payload.append(data, take);
        data += take;
        size -= take;
        if (current_.payload.size() == expected_) {  // also right after an empty frame's header
            ready_.push_back(std::move(current_));
            in_payload_ = false;
        }
    }
}

bool FrameParser::next(Frame& frame) {
    if (ready_.empty()) return false;
    frame = std::move(ready_.front());
    ready_.pop_front();
    return true;
}

namespace {
constexpr const char* writing_the_channel = "mpify: writing to the channel";
constexpr const char* reading_the_channel = "mpify: reading the channel";
}  // namespace

void write_frame(int fd, FrameType type, std::string_view payload) {
    const std::string header = frame_header(type, payload.size());
    write_all(fd, header.data(), header.size(), writing_the_channel);
    write_all(fd, payload.data(), payload.size(), writing_the_channel);
}

std::optional<Frame> read_frame(int fd) {
    char header[frame_header_size];
    if (!read_exact(fd, header, sizeof header, reading_the_channel)) return std::nullopt;
    const std::uint64_t size = checked_payload_size(header);
    Frame frame;
    frame.type = static_cast<FrameType>(header[0]);
    // In pieces: memory follows the bytes that came, not the size the header claims.
    constexpr std::size_t piece = 16u << 20;
    while (frame.payload.size() < size) {
        const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(piece, size - frame.payload.size()));
        make_room(frame.payload, take, size);
        const std::size_t at = frame.payload.size();
        frame.payload.resize(at + take);
        if (!read_exact(fd, frame.payload.data() + at, take, reading_the_channel))
            throw std::runtime_error("mpify: the channel closed in the middle of a message");
    }
    return frame;
}

MPIFY_END_DETAIL_NAMESPACE
