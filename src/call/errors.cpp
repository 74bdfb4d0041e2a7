// Rendering failures into messages that say which rank, what happened, and what to do.
// What the ranks said (their exceptions' messages, their stderr, their hosts; their stacks
// and records by RankStack and line_up_collectives) is made printable where it is put into
// text: the message is shown by a terminal or a notebook.
#include "common/posix.hpp"
#include "common/printable.hpp"

#include <mpify/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <set>

MPIFY_BEGIN_NAMESPACE
namespace {

// The failures of one attempt, after `text` (which ends with ": ").
std::string render_failures(std::string text, const std::vector<RankFailure>& failures) {
    if (failures.size() == 1) return text + failures.front().describe();
    std::set<int> ranks;  // a rank can fail twice (the caller's: timed out, then threw)
    for (const RankFailure& f : failures) ranks.insert(f.rank);
    const std::string how_many = ranks.size() == failures.size()
                                     ? fmt::format("{} ranks failed", ranks.size())
                                     : fmt::format("{} {} failed, {} failures in all", ranks.size(),
                                                   ranks.size() == 1 ? "rank" : "ranks", failures.size());
    text += fmt::format("{}; the first failure is listed first, later ones are often its consequences.", how_many);
    for (const RankFailure& f : failures) text += "\n- " + f.describe();
    return text;
}

// One attempt's failures, or (after Options::restarts ran out) every attempt's in turn.
std::string render(const std::string& context, const std::vector<RankFailure>& failures) {
    const bool one_attempt = std::all_of(failures.begin(), failures.end(),
                                         [&](const RankFailure& f) { return f.attempt == failures.front().attempt; });
    if (one_attempt) return render_failures(context + ": ", failures);
    std::string text = context + ":";
    for (auto first = failures.begin(); first != failures.end();) {
        const int attempt = first->attempt;
        const auto end =
            std::find_if(first, failures.end(), [&](const RankFailure& f) { return f.attempt != attempt; });
        const std::string heading = attempt == 0 ? "\nattempt 1: "
                                                 : fmt::format("\nattempt {} (restart {}): ", attempt + 1, attempt);
        std::string part = render_failures(heading, std::vector<RankFailure>(first, end));
        // An attempt's lines are indented under its heading.
        for (std::size_t at = part.find('\n', 1); at != std::string::npos; at = part.find('\n', at + 1))
            part.insert(at + 1, "  ");
        text += part;
        first = end;
    }
    return text;
}

// Where the ranks that the call stopped (no failure of their own) were.
std::string stopped_ranks_text(const std::vector<RankFailure>& failures, const std::vector<RankStack>& stacks) {
    std::string text;
    for (const RankStack& stack : stacks) {
        const bool failed =
            std::any_of(failures.begin(), failures.end(), [&](const RankFailure& f) { return f.rank == stack.rank; });
        if (failed) continue;
        if (text.empty()) text = "\nwhere the ranks the call stopped were:";
        text += fmt::format("\n- rank {}{}: {}", stack.rank,
                            stack.host.empty() ? "" : " on " + detail::printable(stack.host), stack.summary());
    }
    return text;
}

// The ranks' records of their collective calls, side by side.
std::string collectives_text(const std::vector<RankStack>& stacks) {
    const std::string lined_up = line_up_collectives(stacks);
    return lined_up.empty() ? "" : "\ntheir collective calls (mpify's record):" + lined_up;
}

}  // namespace

std::string RankFailure::headline() const {
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
        case Kind::exited: text = fmt::format("rank {} exited with code {} {}", rank, exit_code, message); break;
        case Kind::timed_out: text = fmt::format("rank {} timed out: {}", rank, message); break;
        case Kind::protocol: text = fmt::format("rank {} broke mpify's protocol: {}", rank, message); break;
        case Kind::reaped_elsewhere:
            text = fmt::format("rank {} ended before returning a result, and something else in this process "
                               "reaped it (a SIGCHLD handler calling waitpid(-1, ...)?), so how it ended is "
                               "unknown. Have that handler wait only for its own children's pids.",
                               rank);
            break;
        case Kind::unreadable_result:
            text = fmt::format("rank {} returned a result that the caller could not read: {}", rank, message);
            break;
        case Kind::lost: text = fmt::format("rank {} was lost: {}", rank, message); break;
    }
    return detail::printable(text);
}

std::string RankFailure::describe() const {
    std::string text = headline();
    if (!stack.threads.empty() || !stack.unavailable.empty()) text += "; where it was: " + stack.summary();
    if (!stderr_tail.empty()) {
        text += stderr_tail.size() == 1 ? std::string("; last line of its stderr:")
                                        : fmt::format("; last {} lines of its stderr:", stderr_tail.size());
        for (const std::string& line : stderr_tail) text += "\n    " + detail::printable(line);
    }
    return text;
}

Interrupted::Interrupted(const std::string& message, std::vector<RankStack> stacks)
    : Error([&] {
          std::string text = message;
          if (!stacks.empty()) text += "; where the ranks were:";
          for (const RankStack& stack : stacks) text += fmt::format("\n- rank {}: {}", stack.rank, stack.summary());
          return text + collectives_text(stacks);
      }()),
      stacks_(std::move(stacks)) {}

WorkerError::WorkerError(const std::string& context, std::vector<RankFailure> failures, std::vector<RankStack> stacks)
    : Error(render(context, failures) + stopped_ranks_text(failures, stacks) + collectives_text(stacks)),
      failures_(std::move(failures)), stacks_(std::move(stacks)) {}

MPIFY_END_NAMESPACE
