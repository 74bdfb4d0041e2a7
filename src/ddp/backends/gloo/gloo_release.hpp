#pragma once
// Releasing the ranks that wait, inside Gloo's constructor, for a rank that gave up.
//
// Gloo (Debian's 2022 version) connects a group's pairs one after the other; of each
// pair one rank listens and the other connects. A rank whose connection fails (another
// process took the port it connects to) throws at once and connects none of its later
// pairs, so the ranks listening for those wait until Gloo's timeout (the group's, five
// minutes by default) before the group can be formed again. The rank that failed knows
// where they listen (Gloo publishes every pair's address in the group's store): it
// connects to each and closes, so each of them finishes its constructor with a closed
// pair and reports.
#include "ddp/ddp_settings.hpp"
#include "store/client.hpp"

#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// After this rank's Gloo constructor threw: connect once to every peer's listening
/// address for its pair with this rank (the addresses Gloo published under `prefix`),
/// and close. Best effort: an address that is missing or not in the layout this
/// version of Gloo writes is skipped (its rank then waits for Gloo's timeout, and the
/// group's rendezvous waits for it).
void release_waiting_peers(store::Client& store, const std::string& prefix, const DdpSettings& s);

MPIFY_END_DETAIL_NAMESPACE
