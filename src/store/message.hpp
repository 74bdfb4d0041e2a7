#pragma once
// The rendezvous store's one message shape, for requests and replies alike:
//   u32 body length | u8 tag | i64 number | u32 field count | count × (u32 length | bytes)
// all little-endian. Whoever can reach the store can send anything: every length is
// checked against the limits below and against the bytes actually present before a
// byte is allocated, and trailing bytes are refused.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace store {

/// Largest body a message may have (a request or a reply): the group's keys are small
/// (a rank's Gloo addresses are a few hundred bytes); 16 MiB leaves ample room.
constexpr std::size_t max_body_bytes = 16u << 20;
/// Most fields one message may carry.
constexpr std::size_t max_fields = 65536;

/// What a request asks for; a reply's tag is `ok` or `failed` (its first field says why).
enum class Tag : std::uint8_t {
    ok = 0,
    failed = 1,
    introduce = 2,    ///< number: the caller's base rank; fields: host, local ranks
    set = 3,          ///< fields: key, value
    compare_set = 4,  ///< fields: key, expected, desired -> the value now stored (c10d semantics)
    get = 5,          ///< fields: key -> value, once the key exists
    add = 6,          ///< number: increment; fields: key -> number: the new value
    remove = 7,       ///< fields: key -> number: 1 if it existed
    check = 8,        ///< fields: keys -> number: 1 if all exist
    count = 9,        ///< -> number: how many keys
    wait = 10,        ///< fields: keys -> ok, once all exist
    members = 11,     ///< -> fields: 6 per member (store/member.hpp)
    leave = 12,       ///< number: 0 for a clean end, 1 after a failure; fields: what failed
    exchange = 13,    ///< fields: key, value, keys... -> the keys' values, once all exist (sets first)
};

struct Message {
    Tag tag = Tag::ok;
    std::int64_t number = 0;
    std::vector<std::string> fields;
};

/// A message that breaks the format or its limits; says what was wrong.
class MalformedMessage : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// The message as bytes, length prefix included.
std::string encode(const Message& message);

/// The body length announced by a 4-byte prefix; throws MalformedMessage above the limit.
std::size_t body_length(std::string_view prefix);

/// Decodes one body (without its length prefix); throws MalformedMessage.
Message decode_body(std::string_view body);

/// Takes one whole message off the front of `buffer` when it holds one; throws
/// MalformedMessage as soon as the announced length is too large.
std::optional<Message> take_message(std::string& buffer);

}  // namespace store
MPIFY_END_DETAIL_NAMESPACE
