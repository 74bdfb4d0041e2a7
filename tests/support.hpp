#pragma once
// Observations the tests make about this process and about child programs.
#include <mpify/options.hpp>
#include <mpify/ranch.hpp>

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace mpify_test {

/// Options whose workers' output goes nowhere: for tests whose workers fail on purpose.
mpify::Options quiet();

/// For workers that crash on purpose: under a sanitizer, the signal must reach the
/// process instead of being turned into the sanitizer's report and exit code.
void let_crashes_through(mpify::Options& options);

/// Pays before a timed call what the first call of a spawner pays once: runs `function`
/// with `options` but no timeout, so the warm template is started and has loaded the
/// function's library (LibTorch's dependencies take more than a second to load under
/// ASan). For tests of short timeouts, whose deadline is meant for the workers' run.
template <class Function, class... Args>
void warm_up(mpify::Options options, int n, Function function, const Args&... args) {
    options.timeout = std::chrono::milliseconds(0);
    mpify::ranch(options, n, function, args...);
}

/// The parent of process `pid`, from /proc; -1 when it is gone.
pid_t parent_of(pid_t pid);

/// The children of `parent`, zombies included.
std::vector<pid_t> children(pid_t parent);

/// True if `pid` is a live warm template (named mpify-template; its workers are not).
bool is_warm_template(pid_t pid);

/// The live warm templates among the children of `parent`.
std::vector<pid_t> warm_templates_of(pid_t parent);

/// The spawner this process's ranch calls use: MPIFY_SPAWNER, else Options' default.
mpify::Spawner spawner_under_test();

/// True if this process has no child processes other than live warm templates, which
/// stay between calls by design (not even zombies).
bool has_no_children();

/// Number of open file descriptors of this process.
int open_fd_count();

/// Number of threads of this process.
int thread_count();

/// Number of threads of this process named `name` (as /proc shows it: 15 characters at most).
int threads_named(const std::string& name);

/// Resident set size of this process, in KiB.
long rss_kib();

/// A TCP socket bound to 127.0.0.1 on a port the kernel chose (stored in `port`), or -1.
int bind_loopback(int& port);

/// A loopback port that was free a moment ago (as an administrator would pick one).
int free_loopback_port();

/// Sets (or, with nullopt, unsets) an environment variable of this process for one scope,
/// and puts back what it was (or its absence).
class EnvironmentVariable {
public:
    EnvironmentVariable(std::string name, const std::optional<std::string>& value);
    ~EnvironmentVariable();
    EnvironmentVariable(const EnvironmentVariable&) = delete;
    EnvironmentVariable& operator=(const EnvironmentVariable&) = delete;

private:
    std::string name_;
    std::optional<std::string> before_;
};

/// A directory that is removed with everything in it.
class TempDir {
public:
    TempDir();
    ~TempDir();
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

/// Captures what this process writes to its stderr (fd 2) while it lives.
class StderrCapture {
public:
    StderrCapture();
    ~StderrCapture();
    /// Ends the capture and returns what was written.
    std::string text();

private:
    void restore();
    TempDir dir_;
    std::string file_;
    int saved_ = -1;
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
