#include "warm_template/protocol.hpp"

#include "common/posix.hpp"
#include "wire/message_codec.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace mpify::detail {
namespace {

// A worker gets at most 4 fds; a message is at most one environment and a path.
constexpr std::size_t max_fds = 4;
constexpr std::size_t max_message = 256 << 10;  // more than a socket buffer takes anyway

void send_message(int socket, const std::string& bytes, const std::vector<int>& fds) {
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

// One whole message, or nullopt at end of stream.
std::optional<std::string> receive_message(int socket, std::vector<UniqueFd>* fds) {
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

}  // namespace

void send_fork_request(int socket, const ForkRequest& request, const std::vector<int>& fds) {
    WireWriter out;
    out.i64(request.caller);
    out.str(request.library);
    out.u32(static_cast<std::uint32_t>(request.env.size()));
    for (const std::string& entry : request.env) out.str(entry);
    const std::string bytes = out.take();
    if (bytes.size() > max_message || fds.size() > max_fds)
        throw std::system_error(EMSGSIZE, std::generic_category(), "mpify: the worker's environment");
    send_message(socket, bytes, fds);
}

namespace {

void expect_end(const WireReader& in, std::string_view bytes, const char* what) {
    if (in.position() != bytes.size())
        throw std::runtime_error("mpify: " + std::to_string(bytes.size() - in.position()) + " bytes after " + what);
}

}  // namespace

ForkRequest decode_fork_request(std::string_view bytes) {
    WireReader in(bytes);
    ForkRequest request;
    request.caller = static_cast<pid_t>(in.i64());
    request.library = in.str();
    const std::uint32_t count = in.u32();
    // Each entry takes at least its 4-byte length: a count the message cannot hold is
    // refused before anything is reserved for it.
    if (count > (bytes.size() - in.position()) / 4)
        throw std::runtime_error("mpify: a request to the template announces " + std::to_string(count) +
                                 " variables in " + std::to_string(bytes.size() - in.position()) + " bytes");
    request.env.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) request.env.push_back(in.str());
    expect_end(in, bytes, "a request to the template");
    return request;
}

TemplateReply decode_reply(std::string_view bytes) {
    WireReader in(bytes);
    TemplateReply reply;
    const std::uint32_t status = in.u32();
    if (status > static_cast<std::uint32_t>(last_template_status))
        throw std::runtime_error("mpify: the template answered with unknown status " + std::to_string(status));
    reply.status = static_cast<TemplateStatus>(status);
    reply.pid = in.i64();
    reply.message = in.str();
    expect_end(in, bytes, "the template's reply");
    return reply;
}

std::optional<ForkRequest> receive_fork_request(int socket, std::vector<UniqueFd>& fds) {
    const std::optional<std::string> bytes = receive_message(socket, &fds);
    if (!bytes) return std::nullopt;
    return decode_fork_request(*bytes);
}

void send_reply(int socket, const TemplateReply& reply) {
    WireWriter out;
    out.u32(static_cast<std::uint32_t>(reply.status));
    out.i64(reply.pid);
    out.str(reply.message);
    send_message(socket, out.take(), {});
}

TemplateReply receive_reply(int socket) {
    const std::optional<std::string> bytes = receive_message(socket, nullptr);
    if (!bytes) throw std::runtime_error("the template closed its socket");
    return decode_reply(*bytes);
}

}  // namespace mpify::detail
