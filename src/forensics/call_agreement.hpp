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
#include <mpify/abi.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Where the ranks of a group publish their records for each other (the group's store),
/// and who is asking.
struct RecordExchange {
    int rank = 0;
    int world_size = 1;
    /// Publishes `text` under `key`, replacing what was there.
    std::function<void(const std::string& key, const std::string& text)> publish;
    /// What was published under `key`, or nullopt when nothing was.
    std::function<std::optional<std::string>(const std::string& key)> published;
};

/// A difference between this rank's recorded calls and a peer's published ones, as an
/// error message naming both ranks and both calls; nullopt when no peer has published a
/// different one. Publishes this rank's record first, once per wait (`sequence`: the call
/// waited in; 0: none, and nothing is done).
std::optional<std::string> find_call_mismatch(const RecordExchange& exchange, std::uint64_t sequence);

MPIFY_END_DETAIL_NAMESPACE
