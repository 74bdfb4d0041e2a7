#include "output_capture.hpp"

#include "common/poll_set.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <system_error>
#include <tuple>
#include <utility>

namespace mpify_kernel {
namespace {

constexpr std::size_t held_limit = 1 << 20;  // output between cells kept for the next cell
// Output is sent this long after it came, or at once when this much has piled up.
constexpr std::chrono::milliseconds batching_delay{10};
constexpr std::size_t large_enough = 256 * 1024;

void check(int result, const char* what) {
    if (result < 0) throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace

OutputCapture::OutputCapture(Sink publish, std::mutex& lock) : publish_(std::move(publish)), publish_lock_(lock) {
    std::fflush(nullptr);
    for (auto& pipe : pipes_) {
        check(::pipe2(pipe, O_CLOEXEC), "pipe2");
        check(::fcntl(pipe[0], F_SETFL, O_NONBLOCK), "fcntl");
    }
    check(saved_stdout_ = ::fcntl(1, F_DUPFD_CLOEXEC, 3), "dup");
    check(saved_stderr_ = ::fcntl(2, F_DUPFD_CLOEXEC, 3), "dup");
    check(::dup2(pipes_[0][1], 1), "dup2");  // dup2 clears FD_CLOEXEC: children inherit 1 and 2
    check(::dup2(pipes_[1][1], 2), "dup2");
    check(control_ = ::eventfd(0, EFD_CLOEXEC), "eventfd");
    // Line-buffered stdout as on a terminal: a cell's printf lines arrive as they are made.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    reader_ = std::thread([this] { read_loop(); });
}

OutputCapture::~OutputCapture() {
    std::fflush(nullptr);
    {
        std::lock_guard<std::mutex> lock(state_lock_);
        stopping_ = true;
    }
    const std::uint64_t one = 1;
    (void)!::write(control_, &one, sizeof one);
    reader_.join();
    ::dup2(saved_stdout_, 1);
    ::dup2(saved_stderr_, 2);
    for (int fd : {pipes_[0][0], pipes_[0][1], pipes_[1][0], pipes_[1][1], saved_stdout_, saved_stderr_, control_})
        ::close(fd);
}

void OutputCapture::begin_cell() {
    std::lock_guard<std::mutex> lock(publish_lock_);
    in_cell_ = true;
    if (!held_out_.empty()) publish_("stdout", std::exchange(held_out_, {}));
    if (!held_err_.empty()) publish_("stderr", std::exchange(held_err_, {}));
}

void OutputCapture::flush() {
    std::fflush(nullptr);
    std::cout.flush();
    std::cerr.flush();
    std::unique_lock<std::mutex> lock(state_lock_);
    const unsigned long long ticket = ++flushes_requested_;
    const std::uint64_t one = 1;
    (void)!::write(control_, &one, sizeof one);
    flushed_.wait(lock, [&] { return flushes_done_ >= ticket || stopping_; });
}

void OutputCapture::end_cell() {
    flush();
    std::lock_guard<std::mutex> lock(publish_lock_);
    in_cell_ = false;
}

void OutputCapture::take(int fd, std::string& pending) {
    char buffer[64 * 1024];
    for (;;) {
        const ssize_t got = ::read(fd, buffer, sizeof buffer);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return;  // EAGAIN: all there is for now
        pending.append(buffer, static_cast<std::size_t>(got));
    }
}

void OutputCapture::send_pending() {
    std::lock_guard<std::mutex> lock(publish_lock_);
    for (auto [pending, held, stream] :
         {std::tuple{&pending_out_, &held_out_, "stdout"}, std::tuple{&pending_err_, &held_err_, "stderr"}}) {
        if (pending->empty()) continue;
        if (in_cell_) {
            publish_(stream, *pending);
        } else if (held->size() < held_limit) {
            held->append(*pending, 0, held_limit - held->size());
        }
        pending->clear();
    }
}

void OutputCapture::read_loop() {
    using mpify::detail::Clock;
    mpify::detail::PollSet fds;
    fds.add(pipes_[0][0], POLLIN);
    fds.add(pipes_[1][0], POLLIN);
    fds.add(control_, POLLIN);
    std::optional<Clock::time_point> send_at;  // when what is pending goes out
    for (;;) {
        try {
            fds.wait(send_at);
        } catch (const std::system_error&) {
            return;  // nothing to wait on: output is no longer captured
        }
        if (fds.revents(0)) take(pipes_[0][0], pending_out_);
        if (fds.revents(1)) take(pipes_[1][0], pending_err_);
        const bool pending = !pending_out_.empty() || !pending_err_.empty();
        if (pending && !send_at) send_at = Clock::now() + batching_delay;
        const bool large = pending_out_.size() + pending_err_.size() >= large_enough;
        if (send_at && (large || Clock::now() >= *send_at)) {
            send_pending();
            send_at.reset();
        }
        if (fds.revents(2) & POLLIN) {
            std::uint64_t count;
            (void)!::read(control_, &count, sizeof count);
            // Whatever was written before the request is in the pipes now: send it all.
            std::unique_lock<std::mutex> lock(state_lock_);
            const unsigned long long requested = flushes_requested_;
            const bool stop = stopping_;
            lock.unlock();
            take(pipes_[0][0], pending_out_);
            take(pipes_[1][0], pending_err_);
            send_pending();
            send_at.reset();
            lock.lock();
            flushes_done_ = requested;
            flushed_.notify_all();
            if (stop) return;
        }
    }
}

}  // namespace mpify_kernel
