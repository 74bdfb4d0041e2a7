#include "store/message.hpp"

#include "common/byte_codec.hpp"

#include <fmt/format.h>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace store {
namespace {

constexpr std::size_t prefix_bytes = 4;
constexpr std::size_t fixed_body_bytes = 1 + 8 + 4;  // tag, number, field count

using Reader = ByteReader<MalformedMessage>;

}  // namespace

std::string encode(const Message& message) {
    std::size_t body = fixed_body_bytes;
    for (const std::string& field : message.fields) body += 4 + field.size();
    if (body > max_body_bytes || message.fields.size() > max_fields)
        throw MalformedMessage(fmt::format("a store message of {} bytes in {} fields is over the limit ({} bytes, "
                                           "{} fields)",
                                           body, message.fields.size(), max_body_bytes, max_fields));
    ByteWriter out;
    out.u32(static_cast<std::uint32_t>(body));
    out.u8(static_cast<std::uint8_t>(message.tag));
    out.i64(message.number);
    out.u32(static_cast<std::uint32_t>(message.fields.size()));
    for (const std::string& field : message.fields) out.str(field);
    return out.take();
}

std::size_t body_length(std::string_view prefix) {
    const std::size_t length = Reader(prefix.substr(0, prefix_bytes), "a store message").u32("its length");
    if (length > max_body_bytes)
        throw MalformedMessage(fmt::format("a store message announces {} bytes; the limit is {}", length,
                                           max_body_bytes));
    if (length < fixed_body_bytes)
        throw MalformedMessage(fmt::format("a store message announces {} bytes; the smallest has {}", length,
                                           fixed_body_bytes));
    return length;
}

Message decode_body(std::string_view body) {
    Reader in(body, "a store message");
    Message message;
    const auto tag = in.u8("the tag");
    if (tag > static_cast<std::uint8_t>(Tag::exchange))
        throw MalformedMessage(fmt::format("unknown store message tag {}", tag));
    message.tag = static_cast<Tag>(tag);
    message.number = in.i64("the number");
    // Every field takes at least its 4-byte length.
    const std::size_t count = in.count("fields", 4, max_fields);
    message.fields.reserve(count);
    for (std::size_t i = 0; i < count; ++i) message.fields.push_back(in.str("a field"));
    in.expect_end();
    return message;
}

std::optional<Message> take_message(std::string& buffer) {
    if (buffer.size() < prefix_bytes) return std::nullopt;
    const std::size_t length = body_length(buffer);
    if (buffer.size() < prefix_bytes + length) return std::nullopt;
    Message message = decode_body(std::string_view(buffer).substr(prefix_bytes, length));
    buffer.erase(0, prefix_bytes + length);
    return message;
}

}  // namespace store
MPIFY_END_DETAIL_NAMESPACE
