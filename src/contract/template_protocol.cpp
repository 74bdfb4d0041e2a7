#include "contract/template_protocol.hpp"

#include "common/byte_codec.hpp"
#include "common/posix.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <system_error>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// A worker gets at most 4 fds; a message is at most one environment and a path.
constexpr std::size_t max_fds = 4;
constexpr std::size_t max_message = 256 << 10;  // more than a socket buffer takes anyway

}  // namespace

void send_message_with_fds(int socket, const std::string& bytes, const std::vector<int>& fds) {
    if (fds.size() > max_fds) throw std::system_error(EMSGSIZE, std::generic_category(), "mpify: fds in one message");
    iovec data{const_cast<char*>(bytes.data()), bytes.size()};
    msghdr message{};
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_fds)] = {};
    if (!fds.empty()) {
        message.msg_control = control;
        message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
    }
    if (retry_on_eintr([&] { return ::sendmsg(socket, &message, MSG_NOSIGNAL); }) < 0)
        throw std::system_error(errno, std::generic_category(), "mpify: talking to the template");
}

std::optional<std::string> receive_message_with_fds(int socket, std::vector<UniqueFd>* fds) {
    std::string bytes(max_message, '\0');
    iovec data{bytes.data(), bytes.size()};
    msghdr message{};
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_fds)] = {};
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t n = retry_on_eintr([&] { return ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC); });
    if (n < 0) throw std::system_error(errno, std::generic_category(), "mpify: talking to the template");
    for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof fd);
            UniqueFd owned(fd);  // closed here unless the receiver wants it
            if (fds != nullptr) fds->push_back(std::move(owned));
        }
    }
    if (n == 0) return std::nullopt;
    if (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
        throw std::runtime_error("mpify: a message to or from the template was cut short");
    bytes.resize(static_cast<std::size_t>(n));
    return bytes;
}

void send_fork_request(int socket, const ForkRequest& request, const std::vector<int>& fds) {
    ByteWriter out;
    out.i64(request.caller);
    out.str(request.library);
    out.str(request.library_origin);
    out.u32(static_cast<std::uint32_t>(request.env.size()));
    for (const std::string& entry : request.env) out.str(entry);
    out.u8(request.answer_load ? 1 : 0);
    const std::string bytes = out.take();
    if (bytes.size() > max_message || fds.size() > max_fds)
        throw std::system_error(EMSGSIZE, std::generic_category(), "mpify: the worker's environment");
    send_message_with_fds(socket, bytes, fds);
}

namespace {

using Reader = ByteReader<std::runtime_error>;

}  // namespace

ForkRequest decode_fork_request(std::string_view bytes) {
    Reader in(bytes, "mpify: a request to the template");
    ForkRequest request;
    request.caller = static_cast<pid_t>(in.i64("the caller's pid"));
    request.library = in.str("the library");
    request.library_origin = in.str("the library's origin");
    // Each entry takes at least its 4-byte length.
    const std::size_t count = in.count("variables", 4, max_message / 4);
    request.env.reserve(count);
    for (std::size_t i = 0; i < count; ++i) request.env.push_back(in.str("a variable"));
    const std::uint8_t answer = in.u8("whether to answer a load");
    if (answer > 1) throw std::runtime_error(fmt::format("mpify: a request to the template says {} to answer", answer));
    request.answer_load = answer == 1;
    in.expect_end();
    return request;
}

TemplateReply decode_reply(std::string_view bytes) {
    Reader in(bytes, "mpify: the template's reply");
    TemplateReply reply;
    const std::uint32_t status = in.u32("the status");
    if (status > static_cast<std::uint32_t>(last_template_status))
        throw std::runtime_error("mpify: the template answered with unknown status " + std::to_string(status));
    reply.status = static_cast<TemplateStatus>(status);
    reply.pid = in.i64("the pid");
    reply.message = in.str("the message");
    in.expect_end();
    return reply;
}

std::optional<ForkRequest> receive_fork_request(int socket, std::vector<UniqueFd>& fds) {
    const std::optional<std::string> bytes = receive_message_with_fds(socket, &fds);
    if (!bytes) return std::nullopt;
    return decode_fork_request(*bytes);
}

void send_reply(int socket, const TemplateReply& reply, const std::vector<int>& fds) {
    ByteWriter out;
    out.u32(static_cast<std::uint32_t>(reply.status));
    out.i64(reply.pid);
    out.str(reply.message);
    send_message_with_fds(socket, out.take(), fds);
}

TemplateReply receive_reply(int socket, std::vector<UniqueFd>* fds) {
    const std::optional<std::string> bytes = receive_message_with_fds(socket, fds);
    if (!bytes) throw std::runtime_error("the template closed its socket");
    return decode_reply(*bytes);
}

std::string encode_worker_end(int code, int status) {
    ByteWriter out;
    out.i64(code);
    out.i64(status);
    return out.take();
}

std::pair<int, int> decode_worker_end(std::string_view text) {
    Reader in(text, "mpify: how a node template's worker ended");
    const auto code = in.i64("its waitid code");
    const auto status = in.i64("its status");
    in.expect_end();
    if (code < INT_MIN || code > INT_MAX || status < INT_MIN || status > INT_MAX)
        throw std::runtime_error("mpify: a node template's worker ended with an impossible status");
    return {static_cast<int>(code), static_cast<int>(status)};
}

MPIFY_END_DETAIL_NAMESPACE
