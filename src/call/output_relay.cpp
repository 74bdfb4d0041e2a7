#include "call/output_relay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {
constexpr std::size_t tail_lines = 20;
// A line longer than this is relayed cut, with a mark that says so, when it ends: a worker
// that writes without newlines must not grow the caller's memory without bound.
constexpr std::size_t max_line = 1 << 20;
constexpr const char* cut_mark = " [... cut by mpify: the line was longer than 1 MiB]";
// What the stderr tail of a crash report keeps of each line.
constexpr std::size_t max_tail_line = 64 * 1024;

// Options::output_prefix with {rank} and {host} replaced; empty: mpify's own prefix.
std::string prefix_of(const std::string& format, int rank, const std::string& host) {
    if (format.empty())
        return host.empty() ? fmt::format("[rank {}] ", rank) : fmt::format("[rank {}@{}] ", rank, host);
    std::string prefix;
    for (std::size_t i = 0; i < format.size();) {
        if (format.compare(i, 6, "{rank}") == 0) {
            prefix += std::to_string(rank);
            i += 6;
        } else if (format.compare(i, 6, "{host}") == 0) {
            prefix += host;
            i += 6;
        } else {
            prefix += format[i++];
        }
    }
    return prefix;
}

}  // namespace

OutputRelay::OutputRelay(const Options& options, CallerStreams& caller, int rank, const std::string& host,
                         Stream stream)
    : options_(options), caller_(caller), rank_(rank), prefix_(prefix_of(options.output_prefix, rank, host)),
      relayed_(options.output_ranks.empty() ||
               std::find(options.output_ranks.begin(), options.output_ranks.end(), rank) != options.output_ranks.end()),
      stream_(stream) {}

void OutputRelay::feed(const char* data, std::size_t size) {
    std::string_view input(data, size);
    if (cut_ && partial_.back() != '\r') {  // the rest of a line cut at max_line: dropped up to its end
        const std::size_t end = input.find_first_of("\r\n");
        if (end == std::string_view::npos) return;
        input.remove_prefix(end);
    }
    partial_.append(input);
    std::size_t start = 0;
    for (std::size_t end; (end = partial_.find_first_of("\r\n", start)) != std::string::npos;) {
        if (partial_[end] == '\r' && end + 1 == partial_.size()) break;  // the next byte tells "\r\n" from a redraw
        const bool redrawn = partial_[end] == '\r' && partial_[end + 1] != '\n';
        std::string line = within_limit(partial_.substr(start, end - start));
        start = end + (partial_[end] == '\r' && !redrawn ? 2 : 1);
        if (redrawn) redraw(line);
        else emit(std::move(line));
    }
    partial_.erase(0, start);
    // A line too long and still open is cut now; one whose '\r' waits for the next byte is
    // whole, and cut when that byte comes.
    if (!cut_ && partial_.size() > max_line && partial_.back() != '\r') {
        partial_.resize(max_line);
        cut_ = true;
    }
}

void OutputRelay::finish() {
    if (!partial_.empty() && partial_.back() == '\r') partial_.pop_back();
    if (!partial_.empty() || cut_) emit(within_limit(std::exchange(partial_, {})));
}

std::string OutputRelay::within_limit(std::string line) {
    if (!cut_ && line.size() <= max_line) return line;
    cut_ = false;
    line.resize(std::min(line.size(), max_line));
    return line + cut_mark;
}

void OutputRelay::redraw(const std::string& line) {
    if (forwarding_ && relayed_ && options_.relay == Relay::lines && !options_.on_output)
        caller_.write(stream_, prefix_ + line + "\r");
}

void OutputRelay::emit(std::string line) {
    if (stream_ == Stream::err) {
        tail_.push_back(line.substr(0, max_tail_line));
        if (tail_.size() > tail_lines) tail_.pop_front();
    }
    if (forwarding_ && relayed_ && options_.relay == Relay::lines) {
        if (options_.on_output) {
            options_.on_output(rank_, stream_, line);
        } else {
            caller_.write(stream_, prefix_ + line + "\n");
        }
    }
}

MPIFY_END_DETAIL_NAMESPACE
