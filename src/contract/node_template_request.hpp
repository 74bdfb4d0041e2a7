#pragma once
// What a caller asks of a node's template (worker/node_template.hpp), one line each on
// the template's stdin (which its launcher, srun or ssh, passes on):
//
//   agent RANK ENDPOINT SECRET\n
//
// fork an agent for RANK of the current call, which connects back to ENDPOINT (as
// MPIFY_CONNECT says it, "tcp:host:port") and proves itself with SECRET (the call's, 64
// hex digits). The line travels the way a per-rank launcher's secret line does.
#include <optional>
#include <string>
#include <string_view>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct AgentRequest {
    int rank = -1;
    std::string endpoint;
    std::string secret_hex;
};

/// The longest line a template reads as one request.
constexpr std::size_t longest_agent_request = 512;

/// What the template says on its stderr (which its launcher brings back to the caller)
/// when the agent of `rank` for the call at `endpoint` ends with a failure: an agent that
/// cannot reach its caller says why just before.
std::string agent_failure_notice(int rank, const std::string& endpoint);

/// The line, with its newline.
std::string format_agent_request(const AgentRequest& request);
/// The request of one line (without its newline); nullopt when it is not one.
std::optional<AgentRequest> parse_agent_request(std::string_view line);

MPIFY_END_DETAIL_NAMESPACE
