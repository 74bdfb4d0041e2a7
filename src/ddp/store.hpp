#pragma once
// The one place a c10d TCPStore is opened: the rendezvous of every DDP group goes
// through a store at the group's address and port.
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <string>

namespace mpify::detail {

/// A TCPStore at addr:port; `server`: this process hosts it (port 0: a free port, which
/// the kernel picks as it binds, so no other process can take it in between). Each
/// operation on it may take `timeout`. Throws what c10d throws.
c10::intrusive_ptr<c10d::TCPStore> open_store(const std::string& addr, int port, std::chrono::milliseconds timeout,
                                              bool server);

}  // namespace mpify::detail
