#include "common/event_fd.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

EventFd::EventFd(const char* purpose) : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (!fd_) throw std::system_error(errno, std::generic_category(), std::string("mpify: eventfd for ") + purpose);
}

void EventFd::notify() const noexcept {
    const std::uint64_t one = 1;
    (void)!::write(fd_.get(), &one, sizeof one);  // can only fail when the counter is full: already awake
}

void EventFd::clear() const noexcept {
    std::uint64_t count = 0;
    (void)!::read(fd_.get(), &count, sizeof count);  // EAGAIN: nothing was pending
}

MPIFY_END_DETAIL_NAMESPACE
