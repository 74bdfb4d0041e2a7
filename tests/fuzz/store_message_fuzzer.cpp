// libFuzzer target: bytes a stranger sends to a group's rendezvous store. Whatever they
// are, decoding either yields messages that encode back to the same bytes, or throws
// MalformedMessage; member lists decode or are refused likewise.
#include "store/member.hpp"
#include "store/message.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace mpify::detail::store;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string buffer(reinterpret_cast<const char*>(data), size);
    try {
        while (auto message = take_message(buffer)) {
            std::string again = encode(*message);
            const auto decoded = take_message(again);
            if (!decoded || !again.empty() || decoded->tag != message->tag || decoded->number != message->number ||
                decoded->fields != message->fields)
                std::abort();  // what decodes must encode back to itself
            try {
                const auto members = decode_members(message->fields);
                if (decode_members(encode_members(members)).size() != members.size()) std::abort();
            } catch (const MalformedMessage&) {
            }
        }
    } catch (const MalformedMessage&) {
    }
    return 0;
}
