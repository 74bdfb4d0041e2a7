#include "contract/remote_link.hpp"

#include "common/byte_codec.hpp"
#include "common/content_hash.hpp"
#include "common/exact_read.hpp"
#include "common/poll_set.hpp"
#include "common/posix.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <fmt/format.h>
#include <stdexcept>
#include <system_error>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

using Reader = ByteReader<std::runtime_error>;

// Environment variables a start message may carry at most: more than any call sets.
constexpr std::size_t most_variables = 4096;

struct LinkHeader {
    LinkType type;
    std::uint32_t payload_size;
};

// Reads a message's header (link_header_size bytes) and checks it: a known type and a
// payload within max_link_payload. Throws std::runtime_error saying what is wrong.
LinkHeader checked_header(std::string_view bytes) {
    Reader header(bytes, "a message of a remote rank's link");
    const std::uint8_t type = header.u8("its type");
    const std::uint32_t size = header.u32("its size");
    if (type < static_cast<std::uint8_t>(LinkType::hello) || type > static_cast<std::uint8_t>(LinkType::dismissed))
        throw std::runtime_error(fmt::format("a link message of unknown type {}", type));
    if (size > max_link_payload)
        throw std::runtime_error(fmt::format("a link message announces {} bytes, more than the {} allowed", size,
                                             max_link_payload));
    return {static_cast<LinkType>(type), size};
}

// Reads exactly `size` bytes into `out` by `deadline`, or throws std::runtime_error
// naming what it was `waiting_for`.
void receive_exactly(int fd, char* out, std::size_t size, Clock::time_point deadline, const char* waiting_for) {
    const ExactRead read = read_exact_until(fd, out, size, deadline);
    switch (read.kind) {
        case ExactRead::complete: return;
        case ExactRead::timed_out:
            throw std::runtime_error(fmt::format("no answer in time, waiting for {}", waiting_for));
        case ExactRead::end_of_file:
            throw std::runtime_error(fmt::format("the connection closed, waiting for {}", waiting_for));
        case ExactRead::failed:
            throw std::system_error(read.error_number, std::generic_category(),
                                    fmt::format("waiting for {}", waiting_for));
    }
}

}  // namespace

std::string link_message(LinkType type, std::string_view payload) {
    ByteWriter out;
    out.u8(static_cast<std::uint8_t>(type));
    out.u32(static_cast<std::uint32_t>(payload.size()));
    std::string message = out.take();
    message.append(payload.data(), payload.size());
    return message;
}

void LinkReader::append(const char* data, std::size_t size) {
    buffer_.append(data, size);
    std::size_t used = 0;
    while (buffer_.size() - used >= link_header_size) {
        const LinkHeader header = checked_header(std::string_view(buffer_).substr(used, link_header_size));
        if (buffer_.size() - used - link_header_size < header.payload_size) break;
        ready_.push_back({header.type, buffer_.substr(used + link_header_size, header.payload_size)});
        used += link_header_size + header.payload_size;
    }
    buffer_.erase(0, used);
}

bool LinkReader::next(LinkMessage& message) {
    if (ready_.empty()) return false;
    message = std::move(ready_.front());
    ready_.pop_front();
    return true;
}

bool LinkReader::read_available(int fd, const std::function<void(LinkMessage&)>& take) {
    const DrainEnd end = drain_available(fd, [&](std::string_view piece) {
        append(piece.data(), piece.size());
        LinkMessage message;
        while (next(message)) take(message);
        return true;
    });
    return end != DrainEnd::closed;
}

void LinkQueue::push(LinkType type, std::string_view payload) {
    do {
        const std::string_view piece = payload.substr(0, max_link_payload);
        bytes_.append(link_message(type, piece));
        payload.remove_prefix(piece.size());
    } while (!payload.empty());
}

std::string encode_hello(const AgentHello& hello) {
    ByteWriter out;
    out.str(hello.mpify_version);  // first, so that any version reads it
    out.str(hello.host);
    out.i64(hello.pid);
    out.str(hello.torch_version);
    return out.take();
}

AgentHello decode_hello(std::string_view payload) {
    Reader in(payload, "a remote rank's hello");
    AgentHello hello;
    hello.mpify_version = in.str("its mpify version");
    hello.host = in.str("its host name");
    hello.pid = in.i64("its pid");
    // Last, and read only when there: an agent of another mpify version may not send it,
    // and must still be told apart by its version.
    if (in.left() > 0) hello.torch_version = in.str("its LibTorch version");
    in.expect_end();
    return hello;
}

std::string encode_start(const std::map<std::string, std::string>& variables) {
    ByteWriter out;
    out.u32(static_cast<std::uint32_t>(variables.size()));
    for (const auto& [name, value] : variables) {
        out.str(name);
        out.str(value);
    }
    return out.take();
}

std::map<std::string, std::string> decode_start(std::string_view payload) {
    Reader in(payload, "a remote rank's start");
    std::map<std::string, std::string> variables;
    const std::size_t count = in.count("environment variables", 8, most_variables);
    for (std::size_t i = 0; i < count; ++i) {
        std::string name = in.str("a variable's name");
        variables[std::move(name)] = in.str("a variable's value");
    }
    in.expect_end();
    return variables;
}

std::string encode_offer(const LibraryOffer& offer) {
    ByteWriter out;
    out.str(offer.path);
    out.u64(offer.size);
    out.str(offer.hash);
    return out.take();
}

LibraryOffer decode_offer(std::string_view payload) {
    Reader in(payload, "a library's offer");
    LibraryOffer offer;
    offer.path = in.str("its path");
    offer.size = in.u64("its size");
    offer.hash = in.str("its hash");
    in.expect_end();
    if (offer.hash.size() != ContentHash::size)
        throw std::runtime_error(fmt::format("a library's offer has a hash of {} bytes, not {}", offer.hash.size(),
                                             ContentHash::size));
    if (offer.path.empty() || offer.path.front() != '/' || offer.path.find('\0') != std::string::npos)
        throw std::runtime_error("a library's offer names no absolute path");
    return offer;
}

std::string encode_here(const LibraryHere& here) {
    ByteWriter out;
    out.u8(here.how);
    out.str(here.path);
    return out.take();
}

LibraryHere decode_here(std::string_view payload) {
    Reader in(payload, "where a library is");
    LibraryHere here;
    const std::uint8_t how = in.u8("how it got there");
    if (how < LibraryHere::at_its_path || how > LibraryHere::shipped)
        throw std::runtime_error(fmt::format("where a library is says how with {}, which means nothing", how));
    here.how = static_cast<LibraryHere::How>(how);
    here.path = in.str("its path");
    in.expect_end();
    return here;
}

std::string encode_end(const WorkerEnd& end) {
    ByteWriter out;
    out.u8(end.exited ? 1 : 0);
    out.i64(end.status);
    return out.take();
}

WorkerEnd decode_end(std::string_view payload) {
    Reader in(payload, "a remote worker's end");
    WorkerEnd end;
    end.exited = in.u8("how it ended") != 0;
    end.status = static_cast<int>(in.i64("its status"));
    in.expect_end();
    return end;
}

std::string encode_started(const WorkerStarted& started) {
    ByteWriter out;
    out.i64(started.pid);
    out.str(started.how);
    return out.take();
}

WorkerStarted decode_started(std::string_view payload) {
    Reader in(payload, "mpify: a remote worker's start");
    WorkerStarted started;
    started.pid = in.i64("its pid");
    started.how = in.str("how it started");
    in.expect_end();
    return started;
}

std::string encode_number(std::int64_t value) {
    ByteWriter out;
    out.i64(value);
    return out.take();
}

std::int64_t decode_number(std::string_view payload, const char* what) {
    Reader in(payload, what);
    const std::int64_t value = in.i64(what);
    in.expect_end();
    return value;
}

void send_link_message(int fd, LinkType type, std::string_view payload) {
    const std::string message = link_message(type, payload);
    write_all(fd, message.data(), message.size(), "mpify: the link to a remote rank");
}

void send_link_message_until(int fd, LinkType type, std::string_view payload, Clock::time_point deadline,
                             const char* sending) {
    const std::string message = link_message(type, payload);
    std::string_view rest = message;
    PollSet fds;
    while (!rest.empty()) {
        fds.clear();
        fds.add(fd, POLLOUT);
        if (fds.wait(deadline) == 0) {
            if (Clock::now() < deadline) continue;  // a signal woke the wait
            throw std::runtime_error(fmt::format("the other end took nothing more in time, sending {}", sending));
        }
        const ssize_t n =
            retry_on_eintr([&] { return ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL | MSG_DONTWAIT); });
        if (n < 0 && errno == EAGAIN) continue;
        if (n < 0) throw std::system_error(errno, std::generic_category(), fmt::format("sending {}", sending));
        rest.remove_prefix(static_cast<std::size_t>(n));
    }
}

LinkMessage receive_link_message(int fd, Clock::time_point deadline, const char* waiting_for) {
    char header_bytes[link_header_size];
    receive_exactly(fd, header_bytes, sizeof header_bytes, deadline, waiting_for);
    const LinkHeader header = checked_header(std::string_view(header_bytes, sizeof header_bytes));
    LinkMessage message{header.type, std::string(header.payload_size, '\0')};
    receive_exactly(fd, message.payload.data(), message.payload.size(), deadline, waiting_for);
    return message;
}

MPIFY_END_DETAIL_NAMESPACE
