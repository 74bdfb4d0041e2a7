// The caller's stdout is a pipe nobody reads (a program piped into a stuck consumer, a
// full terminal buffer): the workers' lines must never stop the call's supervision, so
// timeouts hold, and what the streams did not take is dropped with a note.
#include "functions.hpp"
#include "support.hpp"

#include <mpify/mpify.hpp>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <string>

namespace {

// For one scope, `fd` is the write end of a pipe that nobody reads until read_all().
class UnreadPipe {
public:
    explicit UnreadPipe(int fd) : fd_(fd), saved_(::dup(fd)) {
        REQUIRE(saved_ >= 0);
        REQUIRE(::pipe2(ends_, O_CLOEXEC) == 0);
        REQUIRE(::dup2(ends_[1], fd_) == fd_);
    }
    ~UnreadPipe() {
        restore();
        ::close(ends_[0]);
    }
    UnreadPipe(const UnreadPipe&) = delete;
    UnreadPipe& operator=(const UnreadPipe&) = delete;

    // Puts `fd` back and returns what the pipe holds. It reads what is there, not until
    // the end: a warm template started by the call holds the pipe as its stderr for as
    // long as it lives.
    std::string read_all() {
        restore();
        REQUIRE(::fcntl(ends_[0], F_SETFL, O_NONBLOCK) == 0);
        std::string text;
        char buffer[4096];
        for (ssize_t n; (n = ::read(ends_[0], buffer, sizeof buffer)) > 0;)
            text.append(buffer, static_cast<std::size_t>(n));
        return text;
    }

private:
    void restore() {
        if (saved_ < 0) return;
        ::dup2(saved_, fd_);
        ::close(saved_);
        ::close(ends_[1]);
        saved_ = -1;
    }
    int fd_, saved_;
    int ends_[2] = {-1, -1};
};

mpify::Options workers_only() {
    mpify::Options options;
    options.caller_rank = std::nullopt;  // the caller's own rank would block on the pipe itself
    return options;
}

}  // namespace

TEST_CASE("a stdout nobody reads slows the workers but the call's timeout holds", "[robustness][output][once]") {
    mpify::Options options = workers_only();
    options.timeout = std::chrono::seconds(2);
    mpify_test::warm_up(options, 3, in_program::add, 1, 2);
    bool timed_out = false;
    {
        UnreadPipe unread(STDOUT_FILENO);
        // About 1.7 MB of lines: more than the pipe and mpify's queue hold together.
        try {
            mpify::ranch(options, 3, in_program::print_lines, 25000);
        } catch (const mpify::TimeoutError&) {
            timed_out = true;
        }
    }
    CHECK(timed_out);
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("lines a stdout never takes are dropped at the end of the call with a note saying how much",
          "[robustness][output][once]") {
    std::string note;
    {
        UnreadPipe unread_out(STDOUT_FILENO);
        UnreadPipe read_later_err(STDERR_FILENO);
        // 200 KB: fits mpify's queue, not the pipe; no timeout, so only the stall limit ends the wait.
        mpify::ranch(workers_only(), 3, in_program::print_lines, 3000);
        note = read_later_err.read_all();
    }
    CHECK_THAT(note, Catch::Contains("bytes of the workers' stdout") && Catch::Contains("were dropped"));
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a stdout that is read late still gets every line", "[robustness][output][once]") {
    std::string out;
    {
        UnreadPipe late(STDOUT_FILENO);
        // Less than the pipe holds: written during the call, read after it.
        mpify::ranch(workers_only(), 2, in_program::print_lines, 100);
        out = late.read_all();
    }
    CHECK_THAT(out, Catch::Contains("[rank 0] line 99 of rank 0") && Catch::Contains("[rank 1] line 99 of rank 1"));
}
