#include "call/output_relay.hpp"

#include <fmt/format.h>

#include <string>
#include <utility>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {
constexpr std::size_t tail_lines = 20;
// A "line" that never ends (a progress bar redrawn with \r) is relayed in pieces.
constexpr std::size_t max_line = 64 * 1024;
}  // namespace

OutputRelay::OutputRelay(const Options& options, CallerStreams& caller, int rank, const std::string& host,
                         Stream stream)
    : options_(options), caller_(caller), rank_(rank),
      prefix_(host.empty() ? fmt::format("[rank {}] ", rank) : fmt::format("[rank {}@{}] ", rank, host)),
      stream_(stream) {}

void OutputRelay::feed(const char* data, std::size_t size) {
    partial_.append(data, size);
    std::size_t start = 0;
    for (std::size_t newline; (newline = partial_.find('\n', start)) != std::string::npos; start = newline + 1) {
        emit(partial_.substr(start, newline - start));
    }
    partial_.erase(0, start);
    if (partial_.size() >= max_line) emit(std::exchange(partial_, {}));
}

void OutputRelay::finish() {
    if (!partial_.empty()) emit(std::exchange(partial_, {}));
}

void OutputRelay::emit(std::string line) {
    if (stream_ == Stream::err) {
        tail_.push_back(line);
        if (tail_.size() > tail_lines) tail_.pop_front();
    }
    if (forwarding_ && options_.relay == Relay::lines) {
        if (options_.on_output) {
            options_.on_output(rank_, stream_, line);
        } else {
            caller_.write(stream_, prefix_ + line + "\n");
        }
    }
}

MPIFY_END_DETAIL_NAMESPACE
