#pragma once
// mpify::Options: how a ranch call starts, supervises and reports its ranks.
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace mpify {

/// Which of a worker's two output streams a line came from.
enum class Stream { out, err };

/// What happens to the workers' stdout and stderr.
enum class Relay {
    /// Line by line to the caller's std::cout / std::cerr, each line prefixed "[rank k] ".
    /// Works in notebooks, which capture the caller's streams. The default.
    lines,
    /// The workers write straight to the caller's file descriptors 1 and 2: no prefix,
    /// no extra copy, but a notebook does not see it and crash reports carry no stderr tail.
    inherit,
    /// Discarded (the last stderr lines are still kept for crash reports).
    discard,
};

/// Options of one ranch call. Every field has a sensible default.
struct Options {
    /// The rank the calling process runs itself, or std::nullopt for "the caller only
    /// waits" (then all n ranks are new processes). Must be in [0, n).
    std::optional<int> caller_rank = 0;

    /// true: ranch returns every rank's result, indexed by rank. false: workers send no
    /// result back, and ranch returns only the caller's own result (one element), or an
    /// empty vector when caller_rank is std::nullopt.
    bool gather = true;

    /// Extra environment variables for every rank. Workers start with them; the caller
    /// (when it has a rank) sees them while its fn runs, and its environment is restored
    /// afterwards. LOCAL_RANK and LOCAL_WORLD_SIZE are always set by mpify.
    std::map<std::string, std::string> env;

    /// Give up after this long: every worker is stopped and TimeoutError names the
    /// ranks still running. Zero means no timeout. The caller's own rank cannot be
    /// interrupted: ranch waits for it to return before throwing.
    std::chrono::milliseconds timeout{0};

    /// Where workers' stdout/stderr go; see Relay.
    Relay relay = Relay::lines;

    /// With Relay::lines: if set, each line (without its newline) goes here instead of
    /// std::cout / std::cerr. Called from mpify's supervisor thread, one line at a time.
    std::function<void(int rank, Stream stream, const std::string& line)> on_output;

    /// When ranks must be stopped (a failure, a timeout), each gets SIGTERM, then SIGKILL
    /// after this grace period.
    std::chrono::milliseconds stop_grace{1000};
};

}  // namespace mpify
