#pragma once
// Whether the ranks of a group are in the same collective call: the check that turns the
// classic DDP bug (a rank-dependent `if` around a collective, a different tensor size on
// one rank) into an error at once on every rank, on every backend, instead of a hang
// until the timeout or a backend's error that names neither call.
//
// A rank that has waited in a call for a while (or whose call failed) publishes its
// record of the group's last calls in the group's store under its rank, and reads what
// its peers published: a call that differs from its own under the same sequence number is
// a mismatch. The whole record, not only the call waited in: a backend may complete
// mismatched calls on one rank without a word (Gloo does, for an all-reduce of other
// sizes), and that rank is told when it waits in a later call. Ranks that agree exchange
// nothing: the store is used only by waits that last.
#include "ddp/process_group_state.hpp"

#include <mpify/abi.hpp>
#include <mpify/stack.hpp>

#include <cstdint>
#include <optional>
#include <string>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// A difference between this rank's recorded calls and a peer's published ones, as an
/// error message naming both ranks and both calls; nullopt when no peer has published a
/// different one. Publishes this rank's record first, once per wait (`sequence`: the call
/// waited in).
std::optional<std::string> find_call_mismatch(const ProcessGroupState& group, std::uint64_t sequence);

MPIFY_END_DETAIL_NAMESPACE
