#pragma once
// The private channel between the caller and one worker: a socketpair, inherited by the
// worker as fd 3, carrying length-prefixed frames.
//
//   frame   = type (1 byte) | payload size (8 bytes, host order) | payload
//   call    = caller -> worker, once: CallMeta, then the argument blob to the end
//   result  = worker -> caller: the result blob
//   failure = worker -> caller: exception type and what()
//
// Both ends are the same build on the same machine, so host byte order is fine.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

namespace mpify::detail {

/// The fd number at which a worker finds its end of the channel.
constexpr int worker_channel_fd = 3;
/// The fd number at which a worker finds its arguments when they came in shared memory.
constexpr int worker_args_fd = 4;
/// The environment variable that marks a worker process (value: the channel fd).
constexpr const char* worker_env_var = "MPIFY_WORKER_FD";

enum class FrameType : std::uint8_t { call = 1, result = 2, failure = 3 };
constexpr std::size_t frame_header_size = 9;

/// The 9-byte header of a frame whose payload has `payload_size` bytes.
std::string frame_header(FrameType type, std::uint64_t payload_size);

struct CallMeta {
    std::int32_t rank = 0;
    std::int32_t world_size = 1;
    bool want_result = true;
    std::string function;      ///< registered name
    std::string library;       ///< shared object to load first; empty: the program itself
    std::string context_key;   ///< typeid name of the context; empty: none
    /// Size of the arguments when they are in shared memory (fd worker_args_fd); 0: they
    /// follow the metadata in the call frame.
    std::uint64_t shared_args_size = 0;
};

struct FailureInfo {
    std::string type;
    std::string what;
    /// When the worker caught it, on the machine-wide monotonic clock (steady_clock is
    /// CLOCK_MONOTONIC): comparable with the caller's own clock readings.
    std::int64_t when_ns = 0;
};

/// The call payload's leading part; the argument blob follows it directly.
std::string encode_call_meta(const CallMeta& meta);
/// Splits a call payload into its meta and the argument blob (a view into `payload`).
CallMeta decode_call(std::string_view payload, std::string_view& args);

std::string encode_failure(const FailureInfo& failure);
FailureInfo decode_failure(std::string_view payload);

struct Frame {
    FrameType type{};
    std::string payload;
};

/// Reassembles frames from bytes arriving in arbitrary pieces (the caller's side).
/// Payload bytes are appended once, straight into the frame they belong to.
class FrameParser {
public:
    void append(const char* data, std::size_t size);
    /// Takes the next complete frame, if there is one.
    bool next(Frame& frame);

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

}  // namespace mpify::detail
