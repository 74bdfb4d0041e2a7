#include "common/read_until.hpp"

#include "common/posix.hpp"

#include <poll.h>

MPIFY_BEGIN_DETAIL_NAMESPACE

std::vector<bool> read_until_done(const std::vector<int>& fds, Clock::time_point deadline,
                                  const std::function<bool(std::size_t, std::string_view)>& take) {
    std::vector<bool> done(fds.size());
    for (std::size_t i = 0; i < fds.size(); ++i) done[i] = fds[i] < 0;
    char buffer[65536];
    for (;;) {
        std::vector<pollfd> open;
        std::vector<std::size_t> which;
        for (std::size_t i = 0; i < fds.size(); ++i)
            if (!done[i]) {
                open.push_back({fds[i], POLLIN, 0});
                which.push_back(i);
            }
        if (open.empty()) return done;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) return done;
        const int ready = ::poll(open.data(), open.size(), static_cast<int>(left));
        if (ready == 0) return done;
        if (ready < 0) continue;  // EINTR: the time left is measured again
        for (std::size_t k = 0; k < open.size(); ++k) {
            if (open[k].revents == 0) continue;
            const std::size_t i = which[k];
            const ReadResult got = read_some(fds[i], buffer, sizeof buffer);
            if (got.kind == ReadResult::would_block) continue;
            done[i] = got.kind != ReadResult::bytes || !take(i, std::string_view(buffer, got.size));
        }
    }
}

MPIFY_END_DETAIL_NAMESPACE
