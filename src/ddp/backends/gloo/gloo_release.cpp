#include "ddp/backends/gloo/gloo_release.hpp"

#include "common/unique_fd.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Gloo's key for the addresses of `rank`'s pairs: ProcessGroupGloo gives its first (and,
// on this path, only) device the prefix "0", and Gloo's rendezvous names the addresses
// by rank.
std::string addresses_key(const std::string& prefix, int rank) { return prefix + "/0/" + std::to_string(rank); }

// Connects to `address` and closes at once; waits at most a second for the connection
// (a peer on another machine), never throws.
void knock(const sockaddr_storage& address) {
    const socklen_t length = address.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    const UniqueFd fd(::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return;
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), length) == 0) return;
    if (errno != EINPROGRESS) return;
    pollfd done{fd.get(), POLLOUT, 0};
    (void)::poll(&done, 1, 1000);
}

}  // namespace

void release_waiting_peers(store::Client& store, const std::string& prefix, const DdpSettings& s) {
    const auto pairs = static_cast<std::size_t>(s.world_size - 1);
    for (int peer = 0; peer < s.world_size; ++peer) {
        if (peer == s.rank) continue;
        try {
            const std::string key = addresses_key(prefix, peer);
            if (!store.check({key})) continue;  // the peer never got as far as listening
            const std::vector<uint8_t> addresses = store.get(key);
            // One address per pair, in the order of the peer's ranks without itself.
            if (addresses.empty() || addresses.size() % pairs != 0) continue;
            const std::size_t each = addresses.size() / pairs;
            if (each < sizeof(sockaddr_storage)) continue;
            const std::size_t index = static_cast<std::size_t>(s.rank < peer ? s.rank : s.rank - 1);
            sockaddr_storage address{};
            std::memcpy(&address, addresses.data() + index * each, sizeof address);
            if (address.ss_family == AF_INET || address.ss_family == AF_INET6) knock(address);
        } catch (const std::exception&) {
            // Best effort: the store is gone too, and the rendezvous will say so.
        }
    }
}

MPIFY_END_DETAIL_NAMESPACE
