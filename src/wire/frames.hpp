#pragma once
// The framing on the private channel between the caller and one worker (a socketpair,
// the worker's fd 3): length-prefixed frames.
//
//   frame   = type (1 byte) | payload size (8 bytes, host order) | payload
//   call    = caller -> worker, once: CallMeta, then the argument blob to the end
//   result  = worker -> caller: the result blob
//   failure = worker -> caller: exception type and what()
//
// What call and failure payloads hold is in messages.hpp. Both ends are the same build
// on the same machine, so host byte order is fine.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

enum class FrameType : std::uint8_t { call = 1, result = 2, failure = 3 };
constexpr std::size_t frame_header_size = 9;
/// The largest payload a frame may announce (a call's arguments, a result): 64 GiB.
/// Memory is taken as the bytes arrive, never for what a header merely announces.
constexpr std::uint64_t max_frame_payload = std::uint64_t{64} << 30;

/// Checks a received header: a known type and a size within max_frame_payload. Throws
/// std::runtime_error saying what is wrong; returns the payload size.
std::uint64_t checked_payload_size(const char* header);

/// The 9-byte header of a frame whose payload has `payload_size` bytes.
std::string frame_header(FrameType type, std::uint64_t payload_size);

struct Frame {
    FrameType type{};
    std::string payload;
};

/// Reassembles frames from bytes arriving in arbitrary pieces (the caller's side).
/// Payload bytes are appended once, straight into the frame they belong to. append
/// throws std::runtime_error on a header checked_payload_size refuses.
class FrameParser {
public:
    void append(const char* data, std::size_t size);
    /// Takes the next complete frame, if there is one.
    bool next(Frame& frame);
    /// True while a frame has begun to arrive and is not complete.
    bool mid_frame() const { return !header_.empty() || in_payload_; }

private:
    std::string header_;  // the current frame's header, while incomplete
    Frame current_;
    std::uint64_t expected_ = 0;
    bool in_payload_ = false;
    std::deque<Frame> ready_;
};

/// Blocking writes and reads for the worker's side. Both throw std::system_error on
/// I/O errors; read_frame returns nullopt on a clean end of stream.
void write_frame(int fd, FrameType type, std::string_view payload);
std::optional<Frame> read_frame(int fd);

MPIFY_END_DETAIL_NAMESPACE
