#pragma once
// The ranks of a Gloo group prove, over every pair's connection, that the connection is
// the peer's. Gloo (Debian's 2022 version) listens on one port per pair of ranks and
// takes the first connection that comes: another process on the machine that connects
// first takes the peer's place. The peer's own connection is then refused, or reset when
// it was already queued, so such a group never carries only its ranks' traffic, but
// which rank notices, and when, is a matter of timing. The proof makes it certain: each
// rank publishes a random token in the group's store (private to the ranks) and sends it
// over each of its pairs; a pair that does not bring the peer's token was taken.
#include "ddp/ddp_settings.hpp"
#include "store/client.hpp"

#include "compat/torch_compat.hpp"

#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Makes this rank's token and publishes it under `prefix` + "/proof/<rank>" (before the
/// group is created, so that every rank finds every token once all are created);
/// returns it.
std::string publish_proof(store::Client& store, const std::string& prefix, int rank);

/// Sends this rank's token (`mine`, from publish_proof) to every peer over `group` and
/// checks each peer's. Returns ""
/// when every pair brought its peer's token within `patience`, else what went wrong
/// ("the connection Gloo accepted for rank 1 did not bring rank 1's proof: ..."). After a
/// failure the group is unusable (Gloo closes its pairs when a wait times out).
std::string prove_pairs(C10dBackend& group, store::Client& store, const std::string& prefix, const std::string& mine,
                        const DdpSettings& s, std::chrono::milliseconds patience);

MPIFY_END_DETAIL_NAMESPACE
