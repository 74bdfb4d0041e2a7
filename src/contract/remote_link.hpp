#pragma once
// What a remote rank's agent (worker/remote_agent.hpp, on the rank's machine) and the
// rank's stand-in (worker/stand_in.hpp, on the caller's machine) say to each other over
// the connection the agent made back to the caller, once common/secret_handshake's
// handshake has proved both ends.
//
//   message = type (1 byte) | payload size (u32, little-endian) | payload
//
// No payload exceeds max_link_payload: the call's frames and the worker's output travel
// as many messages, so neither end ever holds more than one message it has not asked for.
//
//   agent -> caller   hello    the agent's mpify version, host name, pid and LibTorch version
//   caller -> agent   library  a library the worker will load: its path, size and SHA-256
//   agent -> caller   library_here    where that library is on the agent's machine
//                     (the path itself, or its copy in the machine's shipped cache); or
//                     library_wanted  it is on no path there: the caller sends its bytes
//   caller -> agent   library_bytes   the library's bytes, in order, then library_here
//                     (or refused) again
//   caller -> agent   start    the environment variables of the call for the worker
//   agent -> caller   started  the worker's pid on its machine; or
//                     refused  why the worker could not start
//   both ways         channel  bytes of the worker's channel (wire/frames.hpp)
//   agent -> caller   out, err bytes the worker wrote to its stdout, stderr
//   agent -> caller   exited   how the worker ended (exit code, or signal); the last message
//   caller -> agent   signal   a signal for the worker (the caller stopping it)
//   caller -> agent   stacks_wanted   where the worker is, please (mpify::where(), a
//                                     failure report): the agent reads its stacks
//   agent -> caller   stacks   what it read (forensics/stack_dump_format.hpp)
//   both ways         alive    every link_beat: silence for link_silence_limit means
//                              the other end, its machine or the network between is gone
//
// Numbers are little-endian (common/byte_codec.hpp): the two machines need not agree on
// byte order, only on the mpify version, which hello carries first.
#include "common/clock.hpp"
#include "common/posix.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

enum class LinkType : std::uint8_t {
    hello = 1,
    start,
    started,
    refused,
    channel,
    out,
    err,
    exited,
    signal,
    alive,
    library,
    library_here,
    library_wanted,
    library_bytes,
    stacks_wanted,
    stacks,
    dismiss,    ///< instead of start: the agent ends without a worker (mpify::warm_nodes)
    dismissed,  ///< the agent's answer: empty, or why its node template could not load the library
};
constexpr std::size_t link_header_size = 5;
/// The largest payload of one message.
constexpr std::size_t max_link_payload = std::size_t(1) << 20;
/// How often each end says it is alive, and how long a silence means it is gone.
constexpr std::chrono::milliseconds link_beat{1000};
constexpr std::chrono::milliseconds link_silence_limit{3000};
/// How a remote rank's stand-in exits when its rank was lost — the link closed before the
/// rank's end came, or fell silent — rather than ending as the rank did (EX_TEMPFAIL).
/// The caller's supervisor reads it as "that machine is gone" (RankFailure::Kind::lost).
constexpr int lost_rank_exit_code = 75;
/// How the stand-in's line on stderr that says why begins: "mpify: lost rank 2@n2: why".
constexpr const char* lost_rank_line_prefix = "mpify: lost rank ";

struct LinkMessage {
    LinkType type{};
    std::string payload;
};

/// One message as it travels.
std::string link_message(LinkType type, std::string_view payload);

/// Reassembles messages from bytes arriving in pieces. append() throws
/// std::runtime_error on an unknown type or a payload over max_link_payload.
class LinkReader {
public:
    void append(const char* data, std::size_t size);
    /// Takes the next complete message, if there is one.
    bool next(LinkMessage& message);
    /// Reads what the non-blocking `fd` holds now and hands each whole message to `take`.
    /// False once the connection has ended. Throws as append() does, and what `take` throws.
    bool read_available(int fd, const std::function<void(LinkMessage&)>& take);

private:
    std::string buffer_;  // bytes of messages not yet complete
    std::deque<LinkMessage> ready_;
};

/// Messages waiting for a non-blocking socket to take them.
class LinkQueue {
public:
    /// Queues `payload` as messages of `type`, split at max_link_payload.
    void push(LinkType type, std::string_view payload);
    /// Writes what the fd takes now. False when the peer is gone (the rest is dropped).
    bool flush(int fd) { return bytes_.flush(fd); }
    bool empty() const { return bytes_.empty(); }
    std::size_t size() const { return bytes_.size(); }

private:
    OutgoingBytes bytes_;  // queued messages, whole; the front may be partly sent
};

/// One end's part in the link's heartbeat: when it last heard the other end, and when it
/// says next that it is alive.
class LinkHeartbeat {
public:
    LinkHeartbeat() : last_heard_(Clock::now()), next_beat_(last_heard_ + link_beat) {}
    /// Something came from the other end (or this end was not listening, and the other's
    /// silence meanwhile does not count).
    void heard(Clock::time_point now) { last_heard_ = now; }
    /// When the poll loop must wake: the next beat, or the end of the silence allowed.
    Clock::time_point wake_at() const { return std::min(next_beat_, last_heard_ + link_silence_limit); }
    /// True once the other end has been silent for link_silence_limit.
    bool silent(Clock::time_point now) const { return now - last_heard_ >= link_silence_limit; }
    /// Queues an alive message when one is due.
    void beat(LinkQueue& queue, Clock::time_point now) {
        if (now < next_beat_) return;
        queue.push(LinkType::alive, {});
        next_beat_ = now + link_beat;
    }

private:
    Clock::time_point last_heard_, next_beat_;
};

struct AgentHello {
    std::string mpify_version;
    std::string host;
    std::int64_t pid = 0;
    std::string torch_version;  ///< the LibTorch the agent's mpify was built against
};
std::string encode_hello(const AgentHello& hello);
AgentHello decode_hello(std::string_view payload);

/// start: the variables the call sets for this worker (LOCAL_RANK, Options::env, ...),
/// on top of the environment the launcher gave the agent.
std::string encode_start(const std::map<std::string, std::string>& variables);
std::map<std::string, std::string> decode_start(std::string_view payload);

/// library: a shared object the call names (the function's), as the caller knows it.
struct LibraryOffer {
    std::string path;     ///< its path on the caller's machine (and the call frame's)
    std::uint64_t size = 0;
    std::string hash;     ///< SHA-256 of its bytes (common/content_hash.hpp), 32 bytes
};
std::string encode_offer(const LibraryOffer& offer);
LibraryOffer decode_offer(std::string_view payload);

/// library_here: the library's path on the agent's machine, and how it got there.
struct LibraryHere {
    enum How : std::uint8_t { at_its_path = 1, in_cache, shipped } how = at_its_path;
    std::string path;
};
std::string encode_here(const LibraryHere& here);
LibraryHere decode_here(std::string_view payload);

/// exited: how the worker ended, as waitid said.
struct WorkerEnd {
    bool exited = true;  ///< true: `status` is its exit code; false: the signal that ended it
    int status = 0;
};
std::string encode_end(const WorkerEnd& end);
WorkerEnd decode_end(std::string_view payload);

/// started: the worker's pid on its machine, and how it was started there ("forked by
/// the node's template", or "exec'd" and why), for the caller's debug log.
struct WorkerStarted {
    std::int64_t pid = -1;
    std::string how;
};
std::string encode_started(const WorkerStarted& started);
WorkerStarted decode_started(std::string_view payload);

/// An 8-byte number (signal's signal).
std::string encode_number(std::int64_t value);
std::int64_t decode_number(std::string_view payload, const char* what);

/// Blocking helpers for the conversation before the call runs. receive_link_message
/// reads one message and not a byte more (what follows is the relay's), waiting until
/// `deadline`; it throws std::runtime_error naming `waiting_for` when the deadline passes,
/// when the connection ends, or on a malformed message.
void send_link_message(int fd, LinkType type, std::string_view payload);
/// send_link_message that gives up at `deadline` (a peer that stopped reading, a machine
/// that stalled) with std::runtime_error naming `sending`.
void send_link_message_until(int fd, LinkType type, std::string_view payload, Clock::time_point deadline,
                             const char* sending);
LinkMessage receive_link_message(int fd, Clock::time_point deadline, const char* waiting_for);

MPIFY_END_DETAIL_NAMESPACE
