#include "wire/frames.hpp"

#include "common/posix.hpp"
#include "wire/large_buffers.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace mpify::detail {

std::string frame_header(FrameType type, std::uint64_t payload_size) {
    std::string header(frame_header_size, '\0');
    header[0] = static_cast<char>(type);
    std::memcpy(&header[1], &payload_size, sizeof payload_size);
    return header;
}

void FrameParser::append(const char* data, std::size_t size) {
    // Reserve no more than this up front: the size comes from the other process.
    constexpr std::uint64_t max_reserve = 1ull << 30;
    while (size > 0) {
        if (!in_payload_) {
            const std::size_t take = std::min(frame_header_size - header_.size(), size);
            header_.append(data, take);
            data += take;
            size -= take;
            if (header_.size() < frame_header_size) return;
            current_ = Frame{};
            current_.type = static_cast<FrameType>(header_[0]);
            std::memcpy(&expected_, header_.data() + 1, sizeof expected_);
            header_.clear();
            reserve_large(current_.payload, static_cast<std::size_t>(std::min(expected_, max_reserve)));
            in_payload_ = true;
        }
        const std::size_t take =
            static_cast<std::size_t>(std::min<std::uint64_t>(expected_ - current_.payload.size(), size));
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
constexpr const char* writing = "mpify: writing to the channel";
constexpr const char* reading = "mpify: reading the channel";
}  // namespace

void write_frame(int fd, FrameType type, std::string_view payload) {
    const std::string header = frame_header(type, payload.size());
    write_all(fd, header.data(), header.size(), writing);
    write_all(fd, payload.data(), payload.size(), writing);
}

std::optional<Frame> read_frame(int fd) {
    char header[frame_header_size];
    if (!read_exact(fd, header, sizeof header, reading)) return std::nullopt;
    std::uint64_t size = 0;
    std::memcpy(&size, header + 1, sizeof size);
    Frame frame;
    frame.type = static_cast<FrameType>(header[0]);
    reserve_large(frame.payload, size);
    frame.payload.resize(size);
    if (size > 0 && !read_exact(fd, frame.payload.data(), size, reading))
        throw std::runtime_error("mpify: the channel closed in the middle of a message");
    return frame;
}

}  // namespace mpify::detail
