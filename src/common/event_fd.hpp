#pragma once
// A wake-up another thread can give a poll loop: an eventfd, checked when made.
#include "common/unique_fd.hpp"

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

class EventFd {
public:
    /// Throws std::system_error naming `purpose` ("the store's stop") when the kernel
    /// gives no eventfd (no fd free): a wake-up that silently does not exist would leave
    /// its loop deaf to the one asking it to stop.
    explicit EventFd(const char* purpose);

    /// The fd to poll for POLLIN.
    int fd() const noexcept { return fd_.get(); }
    /// Wakes whoever polls fd(); safe from any thread, never blocks.
    void notify() const noexcept;
    /// Takes the pending wake-ups, so that the next poll waits again.
    void clear() const noexcept;

private:
    UniqueFd fd_;
};

MPIFY_END_DETAIL_NAMESPACE
