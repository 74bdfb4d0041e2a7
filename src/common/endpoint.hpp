#pragma once
// Where a socket of mpify listens and how to reach it: a UNIX socket when everything is on
// this machine (nothing another machine can reach; the group's store closes connections
// of other users at once), or a TCP port on one address when other machines must reach
// it (bound to that address only, never to every interface). The group's rendezvous
// store listens through this, and so will the caller that remote workers connect back to.
#include "common/clock.hpp"
#include "common/unique_fd.hpp"

#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct Endpoint {
    /// Non-empty: a UNIX socket; "@name" for a name in Linux's abstract namespace (no
    /// file: nothing is left behind, whatever ends the process).
    std::string unix_path;
    std::string host;       ///< else: TCP to host:port
    int port = 0;

    /// "unix:/path", "unix:@name" or "tcp:host:port", as it travels in the environment.
    std::string text() const;
    /// Parses text(); throws UsageError naming `variable` on anything else.
    static Endpoint parse(const std::string& text, const char* variable);
    /// For messages: "host:port" or "the UNIX socket /path".
    std::string describe() const;
};

/// A fresh name in the abstract namespace for one group's UNIX socket: "@mpify-group-"
/// and 128 random bits, so that nobody can guess it, or take it first.
std::string private_socket_name();

/// True when the peer of a UNIX socket connection runs as this process's user.
bool peer_is_this_user(int fd);

/// A listening socket at `endpoint`; with TCP port 0 the kernel picks a free port, which
/// is written back into `endpoint`. Throws UsageError saying why it cannot listen there.
UniqueFd listen_at(Endpoint& endpoint);

/// Asked while the store waits (for a connection, a reply): true once the wait should
/// end because the call was interrupted. The store does not know calls: ddp/ passes
/// mpify::interrupt_requested.
using InterruptCheck = bool (*)() noexcept;

/// A connected socket to `endpoint`, tried again while nothing listens there yet (the
/// master may start later than this host) until `deadline`, or until `interrupted`.
/// Throws Error naming `purpose` ("the group's rendezvous"), the endpoint and the last
/// reason, and ending with `hint`.
UniqueFd connect_to(const Endpoint& endpoint, Clock::time_point deadline, InterruptCheck interrupted,
                    const char* purpose = "the group's rendezvous",
                    const char* hint = "Is the caller with base_rank 0 running there, and is the address right?");

/// An address as numeric text ("10.0.0.2", "::1"); "?" when it has none.
std::string numeric_host(const sockaddr* address, socklen_t size);

/// This machine's address on the route toward `host` (no packet is sent): the address
/// the group's peers can reach this machine at. "127.0.0.1" for a loopback host.
/// Throws UsageError when `host` does not resolve.
std::string local_address_toward(const std::string& host);

/// The address of this machine that `hosts` reach it at: `given` when not empty, else
/// its address on the route to the first host. Throws UsageError when there is no host,
/// or the first does not resolve.
std::string address_toward_hosts(const std::string& given, const std::vector<std::string>& hosts);

MPIFY_END_DETAIL_NAMESPACE
