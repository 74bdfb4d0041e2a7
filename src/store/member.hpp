#pragma once
// Who the rendezvous store has heard from: each caller (the process that ran in_ddp on a
// machine, for its ranks) introduces itself on its connection; the store notices when
// that connection ends without a word, which is how the hosts that remain learn which
// ranks, and which machine, went away. (Ranks connect without introducing themselves:
// their end is their caller's to report.)
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace store {

struct Member {
    enum class State {
        present,  ///< connected
        left,     ///< said goodbye after a clean end
        failed,   ///< said goodbye after a failure (`note` says which)
        gone,     ///< its connection ended without a goodbye: the process or its machine died
    };
    int number = 0;       ///< the caller's first rank (base_rank)
    int local_ranks = 0;  ///< the caller's n (ranks number .. number+n-1)
    std::string host;     ///< its machine's name, and the address the store saw it from
    State state = State::present;
    std::string note;     ///< with `failed`: what failed
};

/// The key the store sets when a member's connection ends without a goodbye (its state
/// becomes `gone`): a machine whose ranks just broke can wait on it, briefly, for the store
/// to take in a death that reached its ranks' connections at the same moment.
inline constexpr const char* silent_departure_key = "mpify/member-gone";

/// The members as message fields, and back; decode throws MalformedMessage.
std::vector<std::string> encode_members(const std::vector<Member>& members);
std::vector<Member> decode_members(const std::vector<std::string>& fields);

/// "present", "left", "failed", "gone".
const char* state_name(Member::State state);

}  // namespace store
MPIFY_END_DETAIL_NAMESPACE
