// Placement::command, the launcher every other resolves to: a command template run here
// by /bin/sh once per remote rank, with %H its host and %C the agent's command. It sets
// nothing a launched process reads: a place only through the others.
#include "common/shell_quoted.hpp"
#include "spawn/launchers/each_launcher.hpp"

#include <mpify/error.hpp>

#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE

std::string template_words(const std::string& launcher_options) {
    if (launcher_options.empty()) return "";
    std::string out;
    for (char c : launcher_options) out += c == '%' ? std::string("%%") : std::string(1, c);
    return out + " ";
}

std::vector<PlacedRank> placed_ranks(const Placement& placement, int n, std::optional<int> caller_rank) {
    if (placement.launcher != Placement::Launcher::command)
        throw UsageError("mpify: Options::placement names a launcher this version does not know");
    if (placement.command.find("%C") == std::string::npos)
        throw UsageError(fmt::format("mpify: Placement::command '{}' has no %C: the agent's command must go in it",
                                     placement.command));
    if (placement.ranks_per_host < 1)
        throw UsageError(fmt::format("mpify: Placement::ranks_per_host is {}; it must be at least 1",
                                     placement.ranks_per_host));
    const std::size_t remote_ranks = static_cast<std::size_t>(n) - (caller_rank && *caller_rank < n ? 1 : 0);
    const auto per_host = static_cast<std::size_t>(placement.ranks_per_host);
    const std::size_t hosts_needed = (remote_ranks + per_host - 1) / per_host;
    if (placement.hosts.size() < hosts_needed)
        throw UsageError(fmt::format("mpify: {} ranks run on other machines, {} per host, so Placement::hosts needs {} "
                                     "hosts; it has {}",
                                     remote_ranks, placement.ranks_per_host, hosts_needed, placement.hosts.size()));
    std::vector<PlacedRank> placed;
    for (int rank = 0; rank < n; ++rank) {
        if (rank == caller_rank) continue;
        placed.push_back({rank, placement.hosts[placed.size() / per_host]});
    }
    return placed;
}

std::string launch_command(const Placement& placement, const std::string& host, const std::string& command) {
    const std::string& pattern = placement.command;
    std::string out;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] != '%') {
            out += pattern[i];
            continue;
        }
        const std::string next = pattern.substr(i + 1, 1);  // "" at the end
        if (next == "H") out += shell_quoted(host);
        else if (next == "C") out += command;
        else if (next == "%") out += '%';
        else
            throw UsageError(fmt::format("mpify: Placement::command '{}' has '%{}'; it may hold %H (the host), %C "
                                         "(the agent's command) and %% (a %)",
                                         pattern, next));
        ++i;
    }
    return out;
}

MPIFY_END_DETAIL_NAMESPACE
