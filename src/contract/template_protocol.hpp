#pragma once
// What a caller and its warm template say to each other, over a SOCK_SEQPACKET
// socketpair (one message per request or reply; a worker's fds ride along as SCM_RIGHTS):
//
//   template -> caller, once, when it has started:  TemplateReply (ready, or why not)
//   caller -> template, for each worker:            ForkRequest + fds (channel, stdout,
//                                                   stderr[, arguments])
//   template -> caller:                             TemplateReply (the worker's pid, or why not)
//
// The caller closing its end is the template's signal to exit.
#include "common/unique_fd.hpp"

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct ForkRequest {
    pid_t caller = 0;              ///< the worker checks that this is its parent
    std::string library;           ///< loaded by the template before it forks; empty: none
    std::vector<std::string> env;  ///< the worker's whole environment, "NAME=value"
};

enum class TemplateStatus : std::uint32_t {
    ok = 0,
    failed = 1,         ///< this request failed (message says why); the template serves on
    stale_library = 2,  ///< the library changed on disk since the template loaded it
    unusable = 3,       ///< the template cannot fork safely (threads); it exits
    /// The fork found no process slot (EAGAIN: a process limit, a cgroup's pids.max),
    /// where the template itself takes one.
    no_process_slot = 4,
};
/// The highest status a reply may carry: a decoder refuses any above it.
constexpr TemplateStatus last_template_status = TemplateStatus::no_process_slot;

struct TemplateReply {
    TemplateStatus status = TemplateStatus::ok;
    std::int64_t pid = -1;  ///< the worker's (the template's own in the ready message)
    std::string message;    ///< why not, when status is not ok
};

/// Sends one request with its fds. Throws std::system_error (EMSGSIZE for a request too
/// large to go in one message, EPIPE if the template is gone).
void send_fork_request(int socket, const ForkRequest& request, const std::vector<int>& fds);
/// The next request and its fds; nullopt when the caller closed its end.
/// Throws std::runtime_error on a malformed message.
std::optional<ForkRequest> receive_fork_request(int socket, std::vector<UniqueFd>& fds);

/// Throws std::system_error if the other end is gone.
void send_reply(int socket, const TemplateReply& reply);

/// The bytes of one message, decoded: lengths checked against the bytes present, an
/// unknown status and trailing bytes refused. Throw std::runtime_error saying what is wrong.
ForkRequest decode_fork_request(std::string_view bytes);
TemplateReply decode_reply(std::string_view bytes);
/// Throws std::system_error on I/O errors and std::runtime_error on end of stream.
TemplateReply receive_reply(int socket);

MPIFY_END_DETAIL_NAMESPACE
