#pragma once
// Reading a message of known size from a blocking socket within a deadline, whatever
// the peer does: the handshake's fixed-size messages, the remote link's set-up.
#include "common/clock.hpp"

#include <cstddef>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// How read_exact_until ended.
struct ExactRead {
    enum Kind { complete, timed_out, end_of_file, failed } kind = complete;
    std::size_t have = 0;   ///< bytes read
    int error_number = 0;   ///< with `failed`: errno
};

/// Reads exactly `size` bytes from `fd` into `data`, waiting for them until `deadline`
/// (a signal that wakes the wait does not end it). A connection reset by the peer is its
/// end, as a close is.
ExactRead read_exact_until(int fd, char* data, std::size_t size, Clock::time_point deadline);

MPIFY_END_DETAIL_NAMESPACE
