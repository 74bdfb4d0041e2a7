// Rendering failures into messages that say which rank, what happened, and what to do.
#include "common/posix.hpp"

#include <mpify/error.hpp>

#include <fmt/format.h>

namespace mpify {
namespace {

std::string render(const std::string& context, const std::vector<RankFailure>& failures) {
    std::string text = context + ": ";
    if (failures.size() == 1) {
        text += failures.front().describe();
        return text;
    }
    text += fmt::format("{} ranks failed; the first failure is listed first, later ones are "
                        "often its consequences.", failures.size());
    for (const RankFailure& f : failures) text += "\n- " + f.describe();
    return text;
}

}  // namespace

std::string RankFailure::describe() const {
    const std::string rank = host.empty() ? std::to_string(this->rank) : fmt::format("{} on {}", this->rank, host);
    std::string text;
    switch (kind) {
        case Kind::threw:
            text = fmt::format("rank {} threw {}", rank, exception_type);
            if (!message.empty()) text += ": " + message;
            break;
        case Kind::signaled:
            text = fmt::format("rank {} was killed by {}", rank, detail::signal_description(signal));
            if (!message.empty()) text += " " + message;
            break;
        case Kind::exited:
            text = fmt::format("rank {} exited with code {} {}", rank, exit_code, message);
            break;
        case Kind::timed_out:
            text = fmt::format("rank {} timed out: {}", rank, message);
            break;
        case Kind::protocol:
            text = fmt::format("rank {} broke mpify's protocol: {}", rank, message);
            break;
        case Kind::reaped_elsewhere:
            text = fmt::format("rank {} ended before returning a result, and something else in this process "
                               "reaped it (a SIGCHLD handler calling waitpid(-1, ...)?), so how it ended is "
                               "unknown. Have that handler wait only for its own children's pids.", rank);
            break;
        case Kind::unreadable_result:
            text = fmt::format("rank {} returned a result that the caller could not read: {}", rank, message);
            break;
    }
    if (!stderr_tail.empty()) {
        text += stderr_tail.size() == 1 ? std::string("; last line of its stderr:")
                                        : fmt::format("; last {} lines of its stderr:", stderr_tail.size());
        for (const std::string& line : stderr_tail) text += "\n    " + line;
    }
    return text;
}

WorkerError::WorkerError(const std::string& context, std::vector<RankFailure> failures)
    : Error(render(context, failures)), failures_(std::move(failures)) {}

}  // namespace mpify
