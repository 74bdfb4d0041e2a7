#pragma once
// The caller's stdout and stderr, as the workers' relayed lines reach them: written
// without ever blocking the supervisor, whatever reads (or does not read) the other end.
//
// A pipe nobody reads, a consumer that stalls, a terminal stopped with Ctrl-S: a write
// that blocked would stop the supervisor's loop, and with it timeouts, interrupts and the
// stopping of failed calls. So the lines wait in a bounded queue, written as poll() says
// the fd takes them; while the queue is full the supervisor stops reading the workers'
// output, and the workers slow down as they would writing to that pipe themselves. At
// the end of the call what is still queued gets until the call's deadline, and at most
// `stall_limit` without progress; the rest is dropped with a note saying how much.
// Where the program gave std::cout (std::cerr) a buffer of its own, the lines go there,
// as before.
#include "call/failure_log.hpp"

#include <mpify/options.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

MPIFY_BEGIN_DETAIL_NAMESPACE

class CallerStreams {
public:
    /// Queued bytes (both streams) at which the workers' output is no longer read.
    static constexpr std::size_t queue_limit = 1 << 20;
    /// How long drain() waits for a caller's stream that takes nothing.
    static constexpr std::chrono::seconds stall_limit{5};

    /// Flushes the caller's own buffered output first, so that it comes before the
    /// workers' lines (as when they went through std::cout).
    CallerStreams();

    /// Queues `text` for the caller's `stream`, and writes what the fd takes now (or
    /// writes it to std::cout / std::cerr, when they do not write to stdout / stderr).
    void write(Stream stream, std::string_view text);

    /// True while the queue holds queue_limit bytes or more.
    bool full() const { return queue(Stream::out).size() + queue(Stream::err).size() >= queue_limit; }

    /// The fd to poll for POLLOUT for `stream`; -1 when nothing is queued for it.
    int fd_to_watch(Stream stream) const;

    /// Writes what the fd of `stream` takes without blocking.
    void write_ready(Stream stream);

    /// At the end of a call: waits for the queued bytes to be taken, until `deadline`,
    /// until `give_up()` (an interrupt), or until neither stream took a byte for
    /// stall_limit; then drops the rest, with a note on stderr (if it takes one).
    void drain(std::optional<Clock::time_point> deadline, const std::function<bool()>& give_up);

private:
    struct Queue {
        std::string bytes;
        bool broken = false;  // the fd failed (closed, EPIPE): what comes for it is dropped
        std::size_t dropped = 0;
    };
    Queue& queue(Stream stream) { return stream == Stream::out ? out_ : err_; }
    const std::string& queue(Stream stream) const { return stream == Stream::out ? out_.bytes : err_.bytes; }
    /// Writes without blocking; returns the bytes written.
    std::size_t write_some(Stream stream);

    Queue out_, err_;
};

MPIFY_END_DETAIL_NAMESPACE
