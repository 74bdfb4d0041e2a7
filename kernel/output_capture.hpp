#pragma once
// Streams what the kernel process writes to fds 1 and 2 — printf, std::cout, the
// workers' relayed `[rank k]` lines, a crashing library's last words — to the front end
// while a cell runs.
//
// fds 1 and 2 become pipes; a thread reads them and hands what came to the sink within
// `batching_delay` (10 ms), so a training cell shows its progress live while a cell
// that prints 10 000 lines sends a few large messages, not 10 000 small ones. Between
// cells nothing is sent (xeus talks to the front end then): output that arrives goes
// out with the next cell.
// The sink is called with the kernel's publish lock held (see Publisher).
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace mpify_kernel {

class OutputCapture {
public:
    /// `publish(stream, text)`: stream is "stdout" or "stderr".
    using Sink = std::function<void(const std::string& stream, const std::string& text)>;

    /// Redirects fds 1 and 2 and starts the reader. `lock` guards every publish.
    OutputCapture(Sink publish, std::mutex& lock);
    /// Puts fds 1 and 2 back and stops the reader.
    ~OutputCapture();
    OutputCapture(const OutputCapture&) = delete;
    OutputCapture& operator=(const OutputCapture&) = delete;

    /// A cell starts: output is published from now on (held output first).
    void begin_cell();
    /// Flushes C and C++ streams and returns once everything written to fds 1 and 2 so
    /// far has been published. Any thread; must not hold the publish lock.
    void flush();
    /// flush(), then output is held until the next begin_cell().
    void end_cell();

    /// The kernel's own original stderr (for its log: never captured).
    int original_stderr() const { return saved_stderr_; }

private:
    void read_loop();
    /// Reads what `fd` holds now into `pending`.
    void take(int fd, std::string& pending);
    /// Hands the pending output to the sink (or holds it, between cells).
    void send_pending();

    Sink publish_;
    std::mutex& publish_lock_;
    int pipes_[2][2] = {{-1, -1}, {-1, -1}};  // [stdout|stderr][read|write]
    int saved_stdout_ = -1, saved_stderr_ = -1;
    int control_ = -1;  // eventfd: flush requests and the stop request

    std::mutex state_lock_;
    std::condition_variable flushed_;
    unsigned long long flushes_requested_ = 0, flushes_done_ = 0;
    bool stopping_ = false;
    bool in_cell_ = false;               // guarded by publish_lock_
    std::string held_out_, held_err_;    // guarded by publish_lock_
    std::string pending_out_, pending_err_;  // read, not sent yet (the reader's own)
    std::thread reader_;
};

}  // namespace mpify_kernel
