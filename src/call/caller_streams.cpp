#include "call/caller_streams.hpp"

#include "common/posix.hpp"

#include <fmt/format.h>
#include <limits.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <iostream>

#if defined(__GLIBCXX__)
#include <ext/stdio_sync_filebuf.h>

#include <mpify/abi.hpp>
#endif

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

int fd_of(Stream stream) { return stream == Stream::out ? STDOUT_FILENO : STDERR_FILENO; }

std::ostream& ostream_of(Stream stream) { return stream == Stream::out ? std::cout : std::cerr; }

// True when std::cout (std::cerr) writes to C's stdout (stderr), as it does unless the
// program gave it a buffer of its own (a string stream, a log file): then the lines go
// to that buffer, as Options::relay promises.
bool goes_to_stdio(Stream stream) {
#if defined(__GLIBCXX__)
    auto* synced = dynamic_cast<__gnu_cxx::stdio_sync_filebuf<char>*>(ostream_of(stream).rdbuf());
    return synced != nullptr && synced->file() == (stream == Stream::out ? stdout : stderr);
#else
    return false;
#endif
}

// True when a write to `fd` would not block now (or would fail at once).
bool writable(int fd) {
    pollfd one{fd, POLLOUT, 0};
    return retry_on_eintr([&] { return ::poll(&one, 1, 0); }) > 0;
}

int millis_until(Clock::time_point t) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 100));
}

}  // namespace

CallerStreams::CallerStreams() {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(stdout);
    std::fflush(stderr);
}

void CallerStreams::write(Stream stream, std::string_view text) {
    if (!goes_to_stdio(stream)) {
        ostream_of(stream) << text << std::flush;
        return;
    }
    Queue& q = queue(stream);
    if (q.broken) {
        q.dropped += text.size();
        return;
    }
    q.bytes.append(text);
    write_some(stream);
}

int CallerStreams::fd_to_watch(Stream stream) const {
    const Queue& q = stream == Stream::out ? out_ : err_;
    return q.bytes.empty() || q.broken ? -1 : fd_of(stream);
}

void CallerStreams::write_ready(Stream stream) { write_some(stream); }

std::size_t CallerStreams::write_some(Stream stream) {
    Queue& q = queue(stream);
    const int fd = fd_of(stream);
    std::size_t written = 0;
    // poll() saying POLLOUT promises that PIPE_BUF bytes go into a pipe without blocking;
    // so the queue goes in pieces of that size, each after asking again.
    while (!q.bytes.empty() && !q.broken && writable(fd)) {
        const std::size_t piece = std::min<std::size_t>(q.bytes.size(), PIPE_BUF);
        const ssize_t n = retry_on_eintr([&] { return ::write(fd, q.bytes.data(), piece); });
        if (n < 0 && errno == EAGAIN) break;
        if (n <= 0) {  // closed, EPIPE, a full disk: nothing more reaches it
            q.broken = true;
            q.dropped += q.bytes.size();
            q.bytes.clear();
            break;
        }
        q.bytes.erase(0, static_cast<std::size_t>(n));
        written += static_cast<std::size_t>(n);
    }
    return written;
}

void CallerStreams::drain(std::optional<Clock::time_point> deadline, const std::function<bool()>& give_up) {
    auto last_progress = Clock::now();
    while (!out_.bytes.empty() || !err_.bytes.empty()) {
        const auto now = Clock::now();
        if ((deadline && now >= *deadline) || now - last_progress >= stall_limit || give_up()) break;
        pollfd fds[2] = {{fd_to_watch(Stream::out), POLLOUT, 0}, {fd_to_watch(Stream::err), POLLOUT, 0}};
        const Clock::time_point wake =
            std::min(deadline.value_or(last_progress + stall_limit), last_progress + stall_limit);
        (void)retry_on_eintr([&] { return ::poll(fds, 2, std::max(1, millis_until(wake))); });
        if (write_some(Stream::out) + write_some(Stream::err) > 0) last_progress = Clock::now();
    }
    for (Stream stream : {Stream::out, Stream::err}) {
        Queue& q = queue(stream);
        q.dropped += q.bytes.size();
        q.bytes.clear();
    }
    if (out_.dropped + err_.dropped == 0) return;
    const std::string note = fmt::format(
        "mpify: {} bytes of the workers' stdout and {} of their stderr were dropped: the caller's streams did not "
        "take them (a pipe nobody reads?)\n",
        out_.dropped, err_.dropped);
    if (!err_.broken && writable(STDERR_FILENO)) (void)!::write(STDERR_FILENO, note.data(), note.size());
    out_.dropped = err_.dropped = 0;
}

MPIFY_END_DETAIL_NAMESPACE
