#include "contract/node_template_request.hpp"

#include <fmt/format.h>

#include <climits>
#include <sstream>

MPIFY_BEGIN_DETAIL_NAMESPACE

std::string format_agent_request(const AgentRequest& request) {
    return fmt::format("agent {} {} {}\n", request.rank, request.endpoint, request.secret_hex);
}

std::string agent_failure_notice(int rank, const std::string& endpoint) {
    return fmt::format("the agent of rank {} for {} ended with a failure", rank, endpoint);
}

std::optional<AgentRequest> parse_agent_request(std::string_view line) {
    if (line.size() > longest_agent_request) return std::nullopt;
    std::istringstream words{std::string(line)};
    std::string verb, rank, extra;
    AgentRequest request;
    if (!(words >> verb >> rank >> request.endpoint >> request.secret_hex) || (words >> extra) || verb != "agent")
        return std::nullopt;
    if (rank.empty() || rank.size() > 9 || rank.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    request.rank = std::stoi(rank);
    return request;
}

MPIFY_END_DETAIL_NAMESPACE
