#pragma once
// The rendezvous of a DdpGuard: every rank connects to the group's TCPStore, announces
// each phase it reached and waits for the others, so that a rank that never comes is
// named in the error instead of surfacing as a socket timeout deep inside Gloo.
#include "ddp/ddp_settings.hpp"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>

namespace mpify::detail {

/// The group's store at s.addr:s.port under the "mpify" prefix; `server` hosts it.
c10::intrusive_ptr<c10d::Store> connect_store(const DdpSettings& s, bool server);

/// Sets `phase`/<s.rank>, then waits until every rank of the group has set its key.
/// Throws Error naming the ranks still missing when s.timeout runs out, with `failure`
/// saying what they failed to do ("did not join the group").
void wait_for_all(c10d::Store& store, const DdpSettings& s, const std::string& phase, const char* failure);

}  // namespace mpify::detail
