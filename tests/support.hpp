#pragma once
// Observations the tests make about this process and about child programs.
#include <sys/types.h>

#include <string>
#include <vector>

namespace mpify_test {

/// True if this process has no child processes at all (not even zombies).
bool has_no_children();

/// Number of open file descriptors of this process.
int open_fd_count();

/// Number of threads of this process.
int thread_count();

/// Resident set size of this process, in KiB.
long rss_kib();

/// A TCP socket bound to 127.0.0.1 on a port the kernel chose (stored in `port`), or -1.
int bind_loopback(int& port);

/// A directory that is removed with everything in it.
class TempDir {
public:
    TempDir();
    ~TempDir();
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

/// A helper program started with its stdout on a pipe.
class Subprocess {
public:
    Subprocess(const std::string& program, const std::vector<std::string>& args);
    ~Subprocess();
    /// The next line of its stdout, without the newline; "" at end of stream.
    std::string read_line();
    /// Its stdout until end of stream.
    std::string read_all();
    void kill(int signal);
    /// Waits for it and returns the raw wait status.
    int wait();
    pid_t pid() const { return pid_; }

private:
    pid_t pid_ = -1;
    int out_ = -1;
    std::string buffer_;
    bool reaped_ = false;
};

/// Waits up to `timeout_ms` for process `pid` (not necessarily a child) to end.
bool wait_for_exit(pid_t pid, int timeout_ms);

}  // namespace mpify_test
