#include "support.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <iterator>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <utility>

extern char** environ;

namespace mpify_test {

mpify::Options quiet() {
    mpify::Options options;
    options.on_output = [](int, mpify::Stream, const std::string&) {};
    return options;
}

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A process's /proc/PID/stat; empty once the process has ended (reading the file of a
// process reaped after it was opened fails, and libstdc++'s stream throws for that).
std::string stat_of(pid_t pid) {
    try {
        return read_file("/proc/" + std::to_string(pid) + "/stat");
    } catch (const std::ios_base::failure&) {
        return {};
    }
}

// Whether `stat` is a live warm template's: "pid (mpify-template) S ...", a state that
// is not Z (a dead template keeps its name until it is reaped).
bool is_warm_template_stat(const std::string& stat) {
    const std::string name = "(mpify-template) ";
    const auto at = stat.find(name);
    return at != std::string::npos && at + name.size() < stat.size() && stat[at + name.size()] != 'Z';
}

}  // namespace

pid_t parent_of(pid_t pid) {
    const std::string stat = stat_of(pid);
    const auto after_name = stat.rfind(')');  // the command may hold spaces and parentheses
    if (after_name == std::string::npos) return -1;
    char state = 0;
    int parent = -1;
    if (std::sscanf(stat.c_str() + after_name + 1, " %c %d", &state, &parent) != 2) return -1;
    return static_cast<pid_t>(parent);
}

std::vector<pid_t> children(pid_t parent) {
    std::vector<pid_t> found;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        const std::string name = entry.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        const auto pid = static_cast<pid_t>(std::stoi(name));
        if (parent_of(pid) == parent) found.push_back(pid);
    }
    return found;
}

bool is_warm_template(pid_t pid) { return is_warm_template_stat(stat_of(pid)); }

std::vector<pid_t> warm_templates_of(pid_t parent) {
    std::vector<pid_t> found = children(parent);
    found.erase(std::remove_if(found.begin(), found.end(), [](pid_t p) { return !is_warm_template(p); }), found.end());
    return found;
}

mpify::Spawner spawner_under_test() {
    const char* chosen = std::getenv("MPIFY_SPAWNER");
    if (chosen == nullptr || *chosen == '\0') return mpify::Options{}.spawner;
    return std::string(chosen) == "exec" ? mpify::Spawner::exec : mpify::Spawner::warm_template;
}

bool has_no_children() {
    for (pid_t child : children(::getpid())) {
        const std::string stat = stat_of(child);
        // Ended since it was listed: a retiring template its pool has just reaped.
        if (stat.empty()) continue;
        // Clang's ThreadSanitizer symbolizes even the reports it suppresses with a child
        // of its own, started at the first and kept for the process's life.
        if (stat.find(" (llvm-symbolizer) ") != std::string::npos) continue;
        if (!is_warm_template_stat(stat)) return false;
    }
    return true;
}

namespace {
int entries_in(const char* directory) {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator(directory)) {
        (void)entry;
        ++count;
    }
    return count;
}
}  // namespace

int open_fd_count() { return entries_in("/proc/self/fd"); }

int thread_count() { return entries_in("/proc/self/task"); }

int threads_named(const std::string& name) {
    int count = 0;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream comm(task.path() / "comm");
        std::string its_name;
        if (std::getline(comm, its_name) && its_name == name) ++count;
    }
    return count;
}

long rss_kib() {
    std::ifstream status("/proc/self/status");
    std::string key;
    while (status >> key) {
        if (key == "VmRSS:") {
            long kib = 0;
            status >> kib;
            return kib;
        }
        status.ignore(1 << 16, '\n');
    }
    return -1;
}

int bind_loopback(int& port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
        if (fd >= 0) ::close(fd);
        return -1;
    }
    port = ntohs(address.sin_port);
    return fd;
}

void let_crashes_through(mpify::Options& options) {
    options.env["ASAN_OPTIONS"] = "handle_segv=0:handle_abort=0";
    const char* tsan = std::getenv("TSAN_OPTIONS");  // keep ./run tsan's suppressions
    options.env["TSAN_OPTIONS"] = std::string(tsan != nullptr ? tsan : "") + " handle_segv=0 handle_abort=0";
}

int free_loopback_port() {
    int port = 0;
    const int probe = bind_loopback(port);
    if (probe < 0) throw std::runtime_error("no loopback port is free");
    ::close(probe);
    return port;
}

TempDir::TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "mpify-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
}

EnvironmentVariable::EnvironmentVariable(std::string name, const std::optional<std::string>& value)
    : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) before_ = old;
    if (value) ::setenv(name_.c_str(), value->c_str(), 1);
    else ::unsetenv(name_.c_str());
}

EnvironmentVariable::~EnvironmentVariable() {
    if (before_) ::setenv(name_.c_str(), before_->c_str(), 1);
    else ::unsetenv(name_.c_str());
}

TempDir::~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

StderrCapture::StderrCapture() : file_(dir_.path() + "/stderr") {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ::dup2(fd, 2);
    ::close(fd);
}

StderrCapture::~StderrCapture() { restore(); }

std::string StderrCapture::text() {
    restore();
    std::ifstream in(file_);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void StderrCapture::restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
}

Subprocess::Subprocess(const std::string& program, const std::vector<std::string>& args) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    std::vector<char*> argv{const_cast<char*>(program.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    out_ = fds[0];
    if (rc != 0) throw std::runtime_error("posix_spawn of " + program + " failed");
}

Subprocess::~Subprocess() {
    if (!reaped_) {
        ::kill(pid_, SIGKILL);
        wait();
    }
    ::close(out_);
}

std::string Subprocess::read_line() {
    for (;;) {
        const auto newline = buffer_.find('\n');
        if (newline != std::string::npos) {
            std::string line = buffer_.substr(0, newline);
            buffer_.erase(0, newline + 1);
            return line;
        }
        char chunk[4096];
        const ssize_t n = ::read(out_, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return std::exchange(buffer_, {});
        buffer_.append(chunk, static_cast<std::size_t>(n));
    }
}

std::string Subprocess::read_all() {
    std::string all = std::exchange(buffer_, {});
    char chunk[4096];
    for (;;) {
        const ssize_t n = ::read(out_, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return all;
        all.append(chunk, static_cast<std::size_t>(n));
    }
}

void Subprocess::kill(int signal) { ::kill(pid_, signal); }

int Subprocess::wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return status;
}

bool wait_for_exit(pid_t pid, int timeout_ms) {
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return errno == ESRCH;  // already gone
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, timeout_ms);
    ::close(fd);
    return ready == 1;
}

}  // namespace mpify_test
