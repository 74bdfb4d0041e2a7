#include "common/endpoint.hpp"

#include "common/clock.hpp"
#include "common/posix.hpp"
#include "common/random_token.hpp"

#include <mpify/error.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <system_error>
#include <thread>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

struct AddrInfoFree {
    void operator()(addrinfo* list) const { ::freeaddrinfo(list); }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoFree>;

// host:port resolved (numeric or by name), TCP; throws UsageError naming the host.
AddrInfoList resolve(const std::string& host, int port, int datagram = 0) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = datagram ? SOCK_DGRAM : SOCK_STREAM;
    addrinfo* list = nullptr;
    const int status = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
    if (status != 0)
        throw UsageError(fmt::format("mpify: the master address '{}' does not resolve ({}); give an address or "
                                     "a name this machine can resolve (MASTER_ADDR / DdpOptions::addr)",
                                     host, ::gai_strerror(status)));
    return AddrInfoList(list);
}

// A UNIX socket's address and its length: a path, or "@name" in the abstract
// namespace (a leading zero byte, and the length says where the name ends).
struct UnixAddress {
    sockaddr_un address{};
    socklen_t size = sizeof(sockaddr_un);
    const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&address); }
};

UnixAddress unix_address(const std::string& path) {
    UnixAddress named;
    named.address.sun_family = AF_UNIX;
    if (path.size() >= sizeof named.address.sun_path)
        throw UsageError(fmt::format("mpify: the socket path {} is longer than {} bytes", path,
                                     sizeof named.address.sun_path - 1));
    std::memcpy(named.address.sun_path, path.c_str(), path.size() + 1);
    if (path.rfind('@', 0) == 0) {
        named.address.sun_path[0] = '\0';
        named.size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
    }
    return named;
}

// A non-blocking connect to one address, finished within `deadline`; errno-style result.
int connect_one(int fd, const sockaddr* address, socklen_t size, Clock::time_point deadline) {
    if (::connect(fd, address, size) == 0) return 0;
    if (errno != EINPROGRESS) return errno;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return ETIMEDOUT;
        pollfd p{fd, POLLOUT, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
        if (ready < 0 && errno != EINTR) return errno;
        if (ready > 0) break;
    }
    int error = 0;
    socklen_t length = sizeof error;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    return error;
}

// Whether connecting again later can succeed: nothing listens yet, or the route is not up yet.
bool worth_retrying(int error) {
    return error == ECONNREFUSED || error == ENOENT || error == ECONNRESET || error == EHOSTUNREACH ||
           error == ENETUNREACH || error == EAGAIN || error == ETIMEDOUT;
}

// Sockets are blocking (the client polls with deadlines) and never inherited by a program
// a worker execs.
UniqueFd new_socket(int family) {
    UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) throw std::system_error(errno, std::generic_category(), "mpify: socket");
    return fd;
}

}  // namespace

std::string numeric_host(const sockaddr* address, socklen_t size) {
    char text[NI_MAXHOST] = {};
    if (::getnameinfo(address, size, text, sizeof text, nullptr, 0, NI_NUMERICHOST) != 0) return "?";
    return text;
}

std::string Endpoint::text() const {
    return unix_path.empty() ? fmt::format("tcp:{}:{}", host, port) : "unix:" + unix_path;
}

Endpoint Endpoint::parse(const std::string& text, const char* variable) {
    Endpoint e;
    if (text.rfind("unix:/", 0) == 0 || text.rfind("unix:@", 0) == 0) {
        e.unix_path = text.substr(5);
        return e;
    }
    const auto colon = text.rfind(':');
    if (text.rfind("tcp:", 0) == 0 && colon > 4) {
        e.host = text.substr(4, colon - 4);
        const std::string port = text.substr(colon + 1);
        char* end = nullptr;
        const long value = std::strtol(port.c_str(), &end, 10);
        if (!port.empty() && *end == '\0' && value > 0 && value <= 65535) {
            e.port = static_cast<int>(value);
            return e;
        }
    }
    throw UsageError(fmt::format("mpify: {}='{}' is not a store address (unix:/path or tcp:host:port)", variable,
                                 text));
}

std::string Endpoint::describe() const {
    return unix_path.empty() ? fmt::format("{}:{}", host, port) : "the UNIX socket " + unix_path;
}

std::string private_socket_name() { return "@mpify-group-" + random_token("the group's socket name"); }

bool peer_is_this_user(int fd) {
    ucred peer{};
    socklen_t size = sizeof peer;
    return ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0 && peer.uid == ::geteuid();
}

UniqueFd listen_at(Endpoint& endpoint) {
    if (!endpoint.unix_path.empty()) {
        UniqueFd fd = new_socket(AF_UNIX);
        const UnixAddress address = unix_address(endpoint.unix_path);
        if (::bind(fd.get(), address.get(), address.size) != 0 || ::listen(fd.get(), 128) != 0)
            throw UsageError(fmt::format("mpify: cannot listen at {}: {}", endpoint.describe(), std::strerror(errno)));
        return fd;
    }
    std::string last_error = "no address";
    const AddrInfoList list = resolve(endpoint.host, endpoint.port);
    for (const addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
        UniqueFd fd = new_socket(a->ai_family);
        const int on = 1;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);  // a port left in TIME_WAIT
        if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 128) != 0) {
            last_error = errno == EADDRNOTAVAIL
                             ? fmt::format("{} is not an address of this machine: the caller with base_rank 0 "
                                           "hosts the rendezvous and must run on the master",
                                           numeric_host(a->ai_addr, a->ai_addrlen))
                             : std::strerror(errno);
            continue;
        }
        sockaddr_storage bound{};
        socklen_t size = sizeof bound;
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &size);
        endpoint.port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                          : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
        return fd;
    }
    throw UsageError(fmt::format("mpify: cannot listen at {}:{} ({})", endpoint.host, endpoint.port, last_error));
}

UniqueFd connect_to(const Endpoint& endpoint, Clock::time_point deadline, InterruptCheck interrupted,
                    const char* purpose, const char* hint) {
    std::string last_error;
    bool permanent = false;
    // One try at every address the endpoint has; an empty fd when none answered.
    auto attempt = [&]() -> UniqueFd {
        auto try_address = [&](int family, const sockaddr* address, socklen_t size) -> UniqueFd {
            UniqueFd fd = new_socket(family);
            const int error = connect_one(fd.get(), address, size, deadline);
            if (error != 0) {
                last_error = std::strerror(error);
                permanent = permanent || !worth_retrying(error);
                return UniqueFd();
            }
            set_blocking(fd.get(), true);
            if (family != AF_UNIX) {
                const int on = 1;
                ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
            }
            return fd;
        };
        if (!endpoint.unix_path.empty()) {
            const UnixAddress address = unix_address(endpoint.unix_path);
            return try_address(AF_UNIX, address.get(), address.size);
        }
        const AddrInfoList list = resolve(endpoint.host, endpoint.port);
        for (const addrinfo* a = list.get(); a != nullptr; a = a->ai_next)
            if (UniqueFd fd = try_address(a->ai_family, a->ai_addr, a->ai_addrlen)) return fd;
        return UniqueFd();
    };
    auto pause = std::chrono::milliseconds(10);
    for (;;) {
        if (UniqueFd fd = attempt()) return fd;
        if (permanent || Clock::now() + pause >= deadline) break;
        if (interrupted())
            throw Error(fmt::format("mpify: stopped trying to reach {} at {}: the call was interrupted", purpose,
                                    endpoint.describe()));
        // Not a synchronization: nothing can tell us when a remote master starts listening.
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
    throw Error(fmt::format("mpify: cannot reach {} at {} ({}). {}", purpose, endpoint.describe(), last_error, hint));
}

std::string local_address_toward(const std::string& host) {
    const AddrInfoList list = resolve(host, 9, /*datagram=*/1);
    for (const addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
        // A connected UDP socket sends nothing; the kernel only chooses the route and the
        // source address it would use.
        UniqueFd fd(::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        if (!fd || ::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) continue;
        sockaddr_storage local{};
        socklen_t size = sizeof local;
        if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &size) != 0) continue;
        return numeric_host(reinterpret_cast<sockaddr*>(&local), size);
    }
    throw UsageError(fmt::format("mpify: this machine has no route to the master address '{}'", host));
}

std::string address_toward_hosts(const std::string& given, const std::vector<std::string>& hosts) {
    if (!given.empty()) return given;
    if (hosts.empty()) throw UsageError("mpify: Options::placement has a launcher but no hosts");
    return local_address_toward(hosts.front());
}

MPIFY_END_DETAIL_NAMESPACE
