#include "forked_check.hpp"

#include "recovery.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace mpify_kernel {
namespace {

void write_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
        const ssize_t written = ::write(fd, data, size);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return;
        data += written;
        size -= static_cast<std::size_t>(written);
    }
}

[[noreturn]] void be_the_child(int report, const std::function<bool(std::string&)>& check,
                               const std::string* last_words) {
    report_crashes_to(report, last_words);
    const int quiet = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (quiet >= 0) {
        ::dup2(quiet, STDOUT_FILENO);
        ::dup2(quiet, STDERR_FILENO);
    }
    std::string text;
    bool passed = false;
    try {
        passed = check(text);
    } catch (const std::exception& e) {
        text = std::string("the kernel's pre-check failed: ") + e.what();
    }
    write_all(report, passed ? "P" : "F", 1);
    write_all(report, text.data(), text.size());
    ::_exit(0);  // no destructor, no atexit handler: they belong to the parent
}

}  // namespace

ChildVerdict check_in_child(const std::function<bool(std::string& text)>& check, const std::string* last_words) {
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
        throw std::runtime_error(std::string("cannot check the cell in a child: pipe: ") + std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) {
        const int error = errno;
        ::close(pipe_fds[0]);
        ::close(pipe_fds[1]);
        throw std::runtime_error(std::string("cannot check the cell in a child: fork: ") + std::strerror(error));
    }
    if (pid == 0) {
        ::close(pipe_fds[0]);
        be_the_child(pipe_fds[1], check, last_words);
    }
    ::close(pipe_fds[1]);
    const int report = pipe_fds[0];

    std::string said;
    bool interrupted = false;
    run_interruptible([&] {
        char buffer[65536];
        while (true) {
            pollfd readable{report, POLLIN, 0};
            if (::poll(&readable, 1, -1) < 0) {
                if (errno == EINTR && interrupt_requested_in_cell()) {
                    interrupted = true;
                    return;
                }
                continue;
            }
            const ssize_t got = ::read(report, buffer, sizeof buffer);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) return;
            said.append(buffer, static_cast<std::size_t>(got));
        }
    });
    ::close(report);
    if (interrupted) ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }

    ChildVerdict verdict;
    if (interrupted) {
        verdict.kind = ChildVerdict::Kind::interrupted;
        return verdict;
    }
    if (WIFSIGNALED(status)) verdict.signal = WTERMSIG(status);
    if (WIFEXITED(status) && WEXITSTATUS(status) > 128) verdict.signal = WEXITSTATUS(status) - 128;
    const char first = said.empty() ? 'C' : said.front();
    verdict.kind = first == 'P' && verdict.signal == 0   ? ChildVerdict::Kind::passed
                   : first == 'F' && verdict.signal == 0 ? ChildVerdict::Kind::failed
                                                         : ChildVerdict::Kind::crashed;
    verdict.text = said.empty() ? std::string() : said.substr(1);
    return verdict;
}

}  // namespace mpify_kernel
