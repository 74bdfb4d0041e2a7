#include "common/posix.hpp"

#include <fcntl.h>
#include <limits.h>
#include <linux/close_range.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <stdexcept>
#include <system_error>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

Pipe make_pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "mpify: pipe2");
    return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

UniqueFd open_dev_null(int flags) {
    UniqueFd fd(retry_on_eintr([&] { return ::open("/dev/null", flags | O_CLOEXEC); }));
    if (!fd) throw std::system_error(errno, std::generic_category(), "mpify: opening /dev/null");
    return fd;
}

void fill_standard_fds() noexcept {
    if (::fcntl(0, F_GETFD) != -1 && ::fcntl(1, F_GETFD) != -1 && ::fcntl(2, F_GETFD) != -1) return;
    // open() returns the lowest free number: it fills the holes below 3 in order.
    for (;;) {
        const int fd = ::open("/dev/null", O_RDWR);
        if (fd < 0) return;
        if (fd > 2) {
            ::close(fd);
            return;
        }
    }
}

CStringArray::CStringArray(const std::vector<std::string>& strings) {
    pointers_.reserve(strings.size() + 1);
    for (const std::string& s : strings) pointers_.push_back(const_cast<char*>(s.c_str()));
    pointers_.push_back(nullptr);
}

void set_blocking(int fd, bool blocking) noexcept {
    const int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK);
}

ReadResult read_some(int fd, char* data, std::size_t size) noexcept {
    const ssize_t n = retry_on_eintr([&] { return ::read(fd, data, size); });
    if (n > 0) return {ReadResult::bytes, static_cast<std::size_t>(n), 0};
    if (n == 0) return {ReadResult::end_of_file, 0, 0};
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {ReadResult::would_block, 0, 0};
    return {ReadResult::error, 0, errno};
}

void write_all(int fd, const char* data, std::size_t size, const char* what) {
    bool socket = true;  // until the kernel says otherwise
    while (size > 0) {
        const ssize_t n =
            retry_on_eintr([&] { return socket ? ::send(fd, data, size, MSG_NOSIGNAL) : ::write(fd, data, size); });
        if (n < 0 && socket && errno == ENOTSOCK) {
            socket = false;
            continue;
        }
        if (n < 0) throw std::system_error(errno, std::generic_category(), what);
        if (n == 0) throw std::system_error(EIO, std::generic_category(), what);  // would loop for ever
        data += n;
        size -= static_cast<std::size_t>(n);
    }
}

bool OutgoingBytes::flush(int fd) {
    while (sent_ < bytes_.size()) {
        const char* data = bytes_.data() + sent_;
        const std::size_t size = bytes_.size() - sent_;
        const ssize_t n =
            retry_on_eintr([&] { return socket_ ? ::send(fd, data, size, MSG_NOSIGNAL) : ::write(fd, data, size); });
        if (n < 0 && socket_ && errno == ENOTSOCK) {
            socket_ = false;
            continue;
        }
        if (n > 0) {
            sent_ += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        bytes_.clear();
        sent_ = 0;
        return false;
    }
    if (sent_ == bytes_.size()) {
        bytes_.clear();
        sent_ = 0;
    } else if (sent_ > (std::size_t(1) << 20)) {  // let go of what went, now and then
        bytes_.erase(0, sent_);
        sent_ = 0;
    }
    return true;
}

bool read_exact(int fd, char* data, std::size_t size, const char* what) {
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = retry_on_eintr([&] { return ::read(fd, data + done, size - done); });
        if (n < 0) throw std::system_error(errno, std::generic_category(), what);
        if (n == 0) {
            if (done == 0) return false;
            throw std::runtime_error(fmt::format("{}: the stream ended in the middle of a message", what));
        }
        done += static_cast<std::size_t>(n);
    }
    return true;
}

bool wait_for_child(pid_t pid, siginfo_t* info) noexcept {
    siginfo_t ignored{};
    return retry_on_eintr([&] { return ::waitid(P_PID, static_cast<id_t>(pid), info ? info : &ignored, WEXITED); }) ==
           0;
}

void signal_child(int pidfd, pid_t pid, int signal) noexcept {
    if (pidfd >= 0 && ::syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0) == 0) return;
    if (pidfd >= 0 && errno != ENOSYS) return;  // ESRCH: it has ended
    ::kill(pid, signal);
}

void signal_child_and_group(int pidfd, pid_t pid, int signal) noexcept {
    signal_child(pidfd, pid, signal);
    // The group's id is its leader's pid: no group has it when the child leads none
    // (ESRCH), and no other process can take it while the child is unreaped.
    ::kill(-pid, signal);
}

void close_fds_from(int first, bool at_exec) noexcept {
    const unsigned flags = at_exec ? CLOSE_RANGE_CLOEXEC : 0U;
    if (::syscall(SYS_close_range, static_cast<unsigned>(first), ~0U, flags) == 0) return;
    for (int fd = first; fd < 65536; ++fd) {  // a kernel before 5.9 (5.11 for CLOEXEC)
        if (at_exec) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
        else ::close(fd);
    }
}

void kill_and_reap(pid_t pid, int pidfd) noexcept {
    signal_child_and_group(pidfd, pid, SIGKILL);
    wait_for_child(pid);
}

std::string this_host_name() {
    char name[HOST_NAME_MAX + 1] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return "?";
    return name;
}

std::string signal_description(int signal) {
    const char* abbrev = ::sigabbrev_np(signal);
    const char* text = ::strsignal(signal);
    if (abbrev == nullptr) return fmt::format("signal {}", signal);
    return fmt::format("SIG{} ({})", abbrev, text ? text : "unknown");
}

MPIFY_END_DETAIL_NAMESPACE
