#pragma once
// The rendezvous of a DdpGuard: every rank connects to the group's store, announces
// each phase it reached and waits for the others, so that a rank that never comes is
// named (with its machine, when the store knows it) instead of surfacing as a socket
// timeout deep inside Gloo.
#include "ddp/ddp_settings.hpp"
#include "store/client.hpp"

#include <exception>
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Where this rank finds the group's store: s.store, or s.addr:s.port.
Endpoint store_endpoint(const DdpSettings& s);

/// A connection to the group's store (see store_endpoint). Throws Error when it cannot
/// be reached within s.timeout. A group whose ranks meet in memory its caller made
/// (s.segment) may never need the store: its connection is made at its first use.
c10::intrusive_ptr<store::Client> connect_store(const DdpSettings& s);

/// Sets `phase`/<s.rank>, then waits until every rank of the group has set its key.
/// Throws Error naming the ranks still missing when s.timeout runs out, with `failure`
/// saying what they failed to do ("did not join the group").
void wait_for_all(store::Client& store, const DdpSettings& s, const std::string& phase, const char* failure);

/// As wait_for_all, with `report` (this rank's word on the phase: "" for all is well) as
/// the value of its key; returns every rank's report, by rank.
std::vector<std::string> gather_reports(store::Client& store, const DdpSettings& s, const std::string& phase,
                                        const std::string& report, const char* failure);

/// The first line of what `e` says, for a report: Gloo and c10d follow it with the C++
/// frames it was thrown from.
std::string first_line_of(const std::exception& e);

/// " (host a: ranks 0-1; no word from the machine of ranks 2-3)": where `ranks` run, as
/// far as the callers that introduced themselves to the store tell.
std::string hosts_of(const std::vector<int>& ranks, const std::vector<store::Member>& members);

MPIFY_END_DETAIL_NAMESPACE
