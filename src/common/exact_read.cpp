#include "common/exact_read.hpp"

#include "common/poll_set.hpp"
#include "common/posix.hpp"

#include <cerrno>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

ExactRead read_exact_until(int fd, char* data, std::size_t size, Clock::time_point deadline) {
    ExactRead read;
    PollSet fds;
    while (read.have < size) {
        fds.clear();
        fds.add(fd, POLLIN);
        if (fds.wait(deadline) == 0) {
            if (Clock::now() < deadline) continue;  // a signal woke the wait
            read.kind = ExactRead::timed_out;
            return read;
        }
        const ReadResult got = read_some(fd, data + read.have, size - read.have);
        if (got.kind == ReadResult::bytes) {
            read.have += got.size;
        } else if (got.kind == ReadResult::end_of_file ||
                   (got.kind == ReadResult::error && got.error_number == ECONNRESET)) {
            read.kind = ExactRead::end_of_file;
            return read;
        } else if (got.kind == ReadResult::error) {
            read.kind = ExactRead::failed;
            read.error_number = got.error_number;
            return read;
        }
    }
    return read;
}

MPIFY_END_DETAIL_NAMESPACE
