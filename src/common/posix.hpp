#pragma once
// The POSIX patterns mpify needs, each written once: retrying a call that a signal
// interrupted, making pipes, opening /dev/null, argv/envp arrays, reading "what there is"
// from a non-blocking fd, writing everything, and waiting for a child to be reaped.
//
// Functions that can fail throw std::system_error carrying errno; callers that must
// report a SpawnError or the like catch and rephrase it with what they were doing.
#include "common/unique_fd.hpp"

#include <signal.h>
#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Calls `call()` again while it fails with EINTR; returns its last result. For calls
/// that report failure as -1 with errno (read, write, poll, waitid, sendmsg, ...).
template <class Call>
auto retry_on_eintr(Call call) {
    for (;;) {
        auto result = call();
        if (!(result < 0 && errno == EINTR)) return result;
    }
}

/// Both ends of a pipe, close-on-exec.
struct Pipe {
    UniqueFd read_end;
    UniqueFd write_end;
};
/// Throws std::system_error.
Pipe make_pipe();

/// /dev/null opened with `flags` (O_RDONLY, O_WRONLY...) and O_CLOEXEC. Throws std::system_error.
UniqueFd open_dev_null(int flags);

/// Opens /dev/null on whichever of fds 0, 1 and 2 are closed (a daemon, a launcher that
/// closed them), so that no pipe, socket or eventfd mpify makes later lands there, where
/// the program's own printing would write into it.
void fill_standard_fds() noexcept;

/// A null-terminated char* array over strings (argv, envp), valid while `strings` lives
/// and is not changed. Built before a fork: the child must not allocate.
class CStringArray {
public:
    explicit CStringArray(const std::vector<std::string>& strings);
    char* const* data() const { return pointers_.data(); }
    char** data() { return pointers_.data(); }

private:
    std::vector<char*> pointers_;
};

/// What one read from a non-blocking fd found.
struct ReadResult {
    enum Kind { bytes, would_block, end_of_file, error } kind;
    std::size_t size = 0;  ///< with `bytes`: how many were read
    int error_number = 0;  ///< with `error`: errno
};
/// One read of at most `size` bytes, retried on EINTR.
ReadResult read_some(int fd, char* data, std::size_t size) noexcept;

/// Why drain_available stopped reading.
enum class DrainEnd {
    would_block,  ///< the fd holds nothing more now: poll says when more comes
    closed,       ///< end of file or a read error: nothing more will come, close the fd
    stopped,      ///< `take` returned false
};
/// Reads what the non-blocking `fd` holds now into `buffer`, piece by piece, and hands
/// each piece to `take(std::string_view)` (valid during that call) until a read would
/// block, the stream ends or fails, or `take` returns false (after taking its piece). A
/// poll loop's relays read until the fd would block, since poll wakes them again only for
/// bytes that come later. The callers treat an error as the end, so its errno is dropped.
template <class Take>
DrainEnd drain_available(int fd, char* buffer, std::size_t size, Take&& take) {
    for (;;) {
        const ReadResult got = read_some(fd, buffer, size);
        if (got.kind == ReadResult::would_block) return DrainEnd::would_block;
        if (got.kind != ReadResult::bytes) return DrainEnd::closed;
        if (!take(std::string_view(buffer, got.size))) return DrainEnd::stopped;
    }
}
/// drain_available with a 64 KiB buffer on the stack.
template <class Take>
DrainEnd drain_available(int fd, Take&& take) {
    char buffer[64 * 1024];
    return drain_available(fd, buffer, sizeof buffer, std::forward<Take>(take));
}

/// Makes reads and writes on `fd` wait (`blocking`) or return at once with EAGAIN.
void set_blocking(int fd, bool blocking) noexcept;

/// Bytes waiting for a non-blocking fd (a socket or a pipe) to take them: a poll loop
/// appends, and flushes when the fd is writable. Sockets are written with MSG_NOSIGNAL;
/// a pipe whose reader is gone raises SIGPIPE unless the process ignores it.
class OutgoingBytes {
public:
    void append(std::string_view bytes) { bytes_.append(bytes.data(), bytes.size()); }
    /// Writes what `fd` takes now (a blocking fd: all of it). False once the fd fails (its
    /// reader is gone): what waited is dropped.
    bool flush(int fd);
    bool empty() const { return sent_ == bytes_.size(); }
    /// Bytes still waiting.
    std::size_t size() const { return bytes_.size() - sent_; }

private:
    std::string bytes_;     // the front, up to sent_, is already written
    std::size_t sent_ = 0;
    bool socket_ = true;    // until the kernel says otherwise
};

/// Writes all `size` bytes (blocking fd), retrying on EINTR and short writes. Sockets
/// are written with MSG_NOSIGNAL: a peer that is gone is an EPIPE error, never SIGPIPE.
/// Throws std::system_error with `what` as its context.
void write_all(int fd, const char* data, std::size_t size, const char* what);

/// Reads exactly `size` bytes (blocking fd). False on end of file before the first byte;
/// throws std::runtime_error on end of file in the middle, std::system_error on errors.
bool read_exact(int fd, char* data, std::size_t size, const char* what);

/// Waits until the child `pid` has ended and reaps it; its waitid status goes to `info`
/// when given. Retried on EINTR; false if it is not (or no longer) our child.
bool wait_for_child(pid_t pid, siginfo_t* info = nullptr) noexcept;

/// Sends `signal` to a child through its pidfd (never to another process that took
/// the pid after the child was reaped, by us or by anything else in the process); by pid
/// when there is no pidfd.
void signal_child(int pidfd, pid_t pid, int signal) noexcept;

/// signal_child, and the same signal to the process group the child leads: what it
/// started (a shell command, a data loader's processes) goes with it. Only for a child
/// that is not yet reaped: until then its pid names no other process nor group. A child
/// that leads no group is signalled alone.
void signal_child_and_group(int pidfd, pid_t pid, int signal) noexcept;

/// Closes every fd from `first` up (close_range, else one by one), or with `at_exec` only
/// marks them close-on-exec. Async-signal-safe: for a child between fork and exec, or one
/// that never execs.
void close_fds_from(int first, bool at_exec = false) noexcept;

/// Sends SIGKILL to a child of this process and to the group it leads (through `pidfd`
/// when given, as signal_child_and_group) and waits until it is reaped.
void kill_and_reap(pid_t pid, int pidfd = -1) noexcept;

/// This machine's host name, for messages and for the machines of a group ("?" when
/// it has none).
std::string this_host_name();

/// "SIGSEGV (Segmentation fault)", or "signal 77" for a number without a name.
std::string signal_description(int signal);

MPIFY_END_DETAIL_NAMESPACE
