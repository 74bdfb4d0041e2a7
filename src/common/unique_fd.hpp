#pragma once
// Owns one file descriptor; closes it exactly once.
#include <unistd.h>

#include <utility>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) noexcept : fd_(fd) {}
    UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept {
        if (this != &other) reset(std::exchange(other.fd_, -1));
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    ~UniqueFd() { reset(); }

    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    void reset(int fd = -1) noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }
    int release() noexcept { return std::exchange(fd_, -1); }

private:
    int fd_ = -1;
};

MPIFY_END_DETAIL_NAMESPACE
