#pragma once
// Splits a worker's output stream into lines and hands each line on: to the caller's
// stdout / stderr with a "[rank k] " prefix, "[rank k@host] " for a rank on another
// machine, or Options::output_prefix (through CallerStreams, which never blocks), or to
// Options::on_output — for the ranks Options::output_ranks names. A line redrawn with
// '\r' (a progress bar) goes to the caller's stream as drawn, one live line. Lines go on
// whole, "\r\n" ends one line; one longer than 1 MiB is cut there, with a mark saying so.
// Keeps the last lines of stderr for crash reports.
#include "call/caller_streams.hpp"

#include <mpify/options.hpp>

#include <cstddef>
#include <deque>
#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

class OutputRelay {
public:
    /// `host`: the machine of a rank on another one, else empty.
    OutputRelay(const Options& options, CallerStreams& caller, int rank, const std::string& host, Stream stream);
    /// Feeds bytes as they arrive; complete lines are relayed at once.
    void feed(const char* data, std::size_t size);
    /// End of stream: relays a last line that had no newline.
    void finish();
    /// From now on lines are only kept for the stderr tail (the output callback failed).
    void stop_forwarding() { forwarding_ = false; }
    /// The last lines seen (stderr only keeps them).
    std::vector<std::string> tail() const { return {tail_.begin(), tail_.end()}; }

private:
    void emit(std::string line);
    /// The line, or its first 1 MiB and the cut mark when it is longer (or was cut).
    std::string within_limit(std::string line);
    /// A line drawn again from its start ("...\r"): shown as it is now.
    void redraw(const std::string& line);

    const Options& options_;
    CallerStreams& caller_;
    int rank_;
    std::string prefix_;  // "[rank k] ", "[rank k@host] " or Options::output_prefix's
    bool relayed_;        // Options::output_ranks names the rank (or is empty)
    Stream stream_;
    std::string partial_;
    bool cut_ = false;  // partial_ holds the first 1 MiB of a longer line, whose rest is dropped
    std::deque<std::string> tail_;
    bool forwarding_ = true;
};

MPIFY_END_DETAIL_NAMESPACE
