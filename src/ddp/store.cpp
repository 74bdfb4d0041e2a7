#include "ddp/store.hpp"

namespace mpify::detail {

c10::intrusive_ptr<c10d::TCPStore> open_store(const std::string& addr, int port, std::chrono::milliseconds timeout,
                                              bool server) {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(port);
    options.isServer = server;
    options.waitWorkers = false;  // the rendezvous (rendezvous.hpp) waits, and names who is missing
    options.timeout = timeout;
    return c10::make_intrusive<c10d::TCPStore>(addr, options);
}

}  // namespace mpify::detail
