// in_ddp's part in the caller: the rendezvous store that every rank's DdpGuard meets at.
#include "ddp/ddp_settings.hpp"
#include "ddp/store.hpp"

#include <mpify/ddp_guard.hpp>
#include <mpify/error.hpp>

#include <fmt/format.h>

namespace mpify::detail {

void with_rendezvous(const DdpOptions& options, int n,
                     const std::function<void(const std::map<std::string, std::string>&)>& run) {
    const int world = options.world_size.value_or(n);
    if (n < 1) throw UsageError(fmt::format("mpify::in_ddp: n must be at least 1 (it is {})", n));
    if (options.base_rank < 0 || options.base_rank + n > world)
        throw UsageError(fmt::format("mpify::in_ddp: ranks {}..{} of this call do not fit in a group of {} "
                                     "(base_rank {}, n {}, world_size {})", options.base_rank,
                                     options.base_rank + n - 1, world, options.base_rank, n, world));
    if (options.port < 0 || options.port > 65535)
        throw UsageError(fmt::format("mpify::in_ddp: port {} is not a TCP port", options.port));
    int port = options.port;
    c10::intrusive_ptr<c10d::TCPStore> store;  // hosted here for every rank, on every machine
    if (options.base_rank == 0) {
        // This caller hosts the rendezvous: with port 0 the kernel picks a free port as
        // the store binds it, so no other process can take it in between.
        auto fail = [&](const std::string& reason) {
            return UsageError(fmt::format("mpify::in_ddp: cannot open the rendezvous store on {}:{} ({}). {}",
                                          options.addr, options.port, reason,
                                          options.port != 0 ? "Is the port in use? Choose another, or 0 for a free one."
                                                            : ""));
        };
        try {
            store = open_store(options.addr, port, options.timeout, /*server=*/true);
            port = store->getPort();
        } catch (const c10::Error& e) {
            throw fail(e.what_without_backtrace());
        } catch (const std::exception& e) {  // c10d's SocketError, among others
            throw fail(e.what());
        }
    } else if (port == 0) {
        throw UsageError("mpify::in_ddp: a caller with base_rank > 0 joins the group of the caller with "
                         "base_rank 0; give it that caller's addr and port (port 0 cannot be agreed on)");
    }
    run(environment_for(options, world, port));
}

}  // namespace mpify::detail
