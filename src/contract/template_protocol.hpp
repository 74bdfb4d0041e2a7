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
//
// A node's template (worker/node_template.hpp) speaks the same with each agent it forked,
// plus a request without fds, which asks it to load the library now and is not answered,
// and with two differences, since the worker is the template's child there and not the
// agent's: its ok reply carries the worker's pidfd, and when the worker has ended and
// been reaped, a worker_ended reply says how (pid and encode_worker_end in its message).
#include "common/unique_fd.hpp"

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct ForkRequest {
    pid_t caller = 0;              ///< the worker checks that this is its parent
    std::string library;           ///< loaded by the template before it forks; empty: none
    /// The library's path on the caller's machine, where `library` is a copy of it under
    /// another path (shipped, or found in this machine's cache); empty: `library` is it.
    std::string library_origin;
    std::vector<std::string> env;  ///< the worker's whole environment, "NAME=value"
    /// For a request without fds (load `library`, fork nothing): a reply once it is loaded
    /// (or why not); without it such a request is answered by nothing.
    bool answer_load = false;
};

enum class TemplateStatus : std::uint32_t {
    ok = 0,
    failed = 1,         ///< this request failed (message says why); the template serves on
    stale_library = 2,  ///< the library changed on disk since the template loaded it
    unusable = 3,       ///< the template cannot fork safely (threads); it exits
    /// The fork found no process slot (EAGAIN: a process limit, a cgroup's pids.max),
    /// where the template itself takes one.
    no_process_slot = 4,
    /// A node template's worker has ended: pid is its pid, message encode_worker_end.
    worker_ended = 5,
};
/// The highest status a reply may carry: a decoder refuses any above it.
constexpr TemplateStatus last_template_status = TemplateStatus::worker_ended;

struct TemplateReply {
    TemplateStatus status = TemplateStatus::ok;
    std::int64_t pid = -1;  ///< the worker's (the template's own in the ready message)
    std::string message;    ///< why not, when status is not ok
};

/// One message of `bytes` with `fds` riding along (SCM_RIGHTS, at most 4). Throws
/// std::system_error (EPIPE if the other end is gone).
void send_message_with_fds(int socket, const std::string& bytes, const std::vector<int>& fds);
/// One whole message, its fds to `fds` when given (else closed); nullopt at end of
/// stream. Throws std::system_error on I/O errors, std::runtime_error when cut short.
std::optional<std::string> receive_message_with_fds(int socket, std::vector<UniqueFd>* fds);

/// Sends one request with its fds. Throws std::system_error (EMSGSIZE for a request too
/// large to go in one message, EPIPE if the template is gone).
void send_fork_request(int socket, const ForkRequest& request, const std::vector<int>& fds);
/// The next request and its fds; nullopt when the caller closed its end.
/// Throws std::runtime_error on a malformed message.
std::optional<ForkRequest> receive_fork_request(int socket, std::vector<UniqueFd>& fds);

/// Throws std::system_error if the other end is gone. `fds` ride along (a node
/// template's ok reply carries the worker's pidfd).
void send_reply(int socket, const TemplateReply& reply, const std::vector<int>& fds = {});

/// The bytes of one message, decoded: lengths checked against the bytes present, an
/// unknown status and trailing bytes refused. Throw std::runtime_error saying what is wrong.
ForkRequest decode_fork_request(std::string_view bytes);
TemplateReply decode_reply(std::string_view bytes);
/// Throws std::system_error on I/O errors and std::runtime_error on end of stream. The
/// fds that came with it go to `fds` when given, else are closed.
TemplateReply receive_reply(int socket, std::vector<UniqueFd>* fds = nullptr);

/// How a node template's worker ended, as waitid said (si_code, si_status), in a
/// worker_ended reply's message; decode throws std::runtime_error on anything else.
std::string encode_worker_end(int code, int status);
std::pair<int, int> decode_worker_end(std::string_view text);

MPIFY_END_DETAIL_NAMESPACE
