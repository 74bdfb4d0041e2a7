#include "channel.hpp"
#include "wire.hpp"

#include <mpify/detail/blob.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace mpify::detail {
namespace {

void write_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
        const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw std::system_error(errno, std::generic_category(), "mpify: writing to the channel");
        }
        data += n;
        size -= static_cast<std::size_t>(n);
    }
}

// Reads exactly `size` bytes; false on end of stream before the first byte.
bool read_exact(int fd, char* data, std::size_t size) {
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = ::read(fd, data + done, size - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw std::system_error(errno, std::generic_category(), "mpify: reading the channel");
        }
        if (n == 0) {
            if (done == 0) return false;
            throw std::runtime_error("mpify: the channel closed in the middle of a message");
        }
        done += static_cast<std::size_t>(n);
    }
    return true;
}

}  // namespace

std::string frame_header(FrameType type, std::uint64_t payload_size) {
    std::string header(frame_header_size, '\0');
    header[0] = static_cast<char>(type);
    std::memcpy(&header[1], &payload_size, sizeof payload_size);
    return header;
}

std::string encode_call_meta(const CallMeta& meta) {
    WireWriter w;
    w.u32(static_cast<std::uint32_t>(meta.rank));
    w.u32(static_cast<std::uint32_t>(meta.world_size));
    w.u32(meta.want_result ? 1 : 0);
    w.str(meta.function);
    w.str(meta.library);
    w.str(meta.context_key);
    w.i64(static_cast<std::int64_t>(meta.shared_args_size));
    return w.take();
}

CallMeta decode_call(std::string_view payload, std::string_view& args) {
    WireReader r(payload);
    CallMeta meta;
    meta.rank = static_cast<std::int32_t>(r.u32());
    meta.world_size = static_cast<std::int32_t>(r.u32());
    meta.want_result = r.u32() != 0;
    meta.function = r.str();
    meta.library = r.str();
    meta.context_key = r.str();
    meta.shared_args_size = static_cast<std::uint64_t>(r.i64());
    args = payload.substr(r.position());
    return meta;
}

std::string encode_failure(const FailureInfo& failure) {
    WireWriter w;
    w.str(failure.type);
    w.str(failure.what);
    w.i64(failure.when_ns);
    return w.take();
}

FailureInfo decode_failure(std::string_view payload) {
    WireReader r(payload);
    FailureInfo failure;
    failure.type = r.str();
    failure.what = r.str();
    failure.when_ns = r.i64();
    return failure;
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

void write_frame(int fd, FrameType type, std::string_view payload) {
    const std::string header = frame_header(type, payload.size());
    write_all(fd, header.data(), header.size());
    write_all(fd, payload.data(), payload.size());
}

std::optional<Frame> read_frame(int fd) {
    char header[frame_header_size];
    if (!read_exact(fd, header, sizeof header)) return std::nullopt;
    std::uint64_t size = 0;
    std::memcpy(&size, header + 1, sizeof size);
    Frame frame;
    frame.type = static_cast<FrameType>(header[0]);
    reserve_large(frame.payload, size);
    frame.payload.resize(size);
    if (size > 0 && !read_exact(fd, frame.payload.data(), size))
        throw std::runtime_error("mpify: the channel closed in the middle of a message");
    return frame;
}

}  // namespace mpify::detail
