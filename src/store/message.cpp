#include "store/message.hpp"

#include <fmt/format.h>

namespace mpify::detail::store {
namespace {

constexpr std::size_t prefix_bytes = 4;
constexpr std::size_t fixed_body_bytes = 1 + 8 + 4;  // tag, number, field count

void put(std::string& out, std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// Reads little-endian numbers and byte strings off a body, never past its end.
class Reader {
public:
    explicit Reader(std::string_view body) : rest_(body) {}
    std::uint64_t number(int bytes, const char* what) {
        need(static_cast<std::size_t>(bytes), what);
        std::uint64_t value = 0;
        for (int i = 0; i < bytes; ++i) value |= std::uint64_t(static_cast<unsigned char>(rest_[i])) << (8 * i);
        rest_.remove_prefix(static_cast<std::size_t>(bytes));
        return value;
    }
    std::string bytes(std::size_t size, const char* what) {
        need(size, what);
        std::string value(rest_.substr(0, size));
        rest_.remove_prefix(size);
        return value;
    }
    std::size_t left() const { return rest_.size(); }

private:
    void need(std::size_t size, const char* what) const {
        if (size > rest_.size())
            throw MalformedMessage(fmt::format("{} needs {} bytes but the message has {} left", what, size,
                                               rest_.size()));
    }
    std::string_view rest_;
};

}  // namespace

std::string encode(const Message& message) {
    std::size_t body = fixed_body_bytes;
    for (const std::string& field : message.fields) body += 4 + field.size();
    if (body > max_body_bytes || message.fields.size() > max_fields)
        throw MalformedMessage(fmt::format("a store message of {} bytes in {} fields is over the limit ({} bytes, "
                                           "{} fields)", body, message.fields.size(), max_body_bytes, max_fields));
    std::string out;
    out.reserve(prefix_bytes + body);
    put(out, body, 4);
    put(out, static_cast<std::uint8_t>(message.tag), 1);
    put(out, static_cast<std::uint64_t>(message.number), 8);
    put(out, message.fields.size(), 4);
    for (const std::string& field : message.fields) {
        put(out, field.size(), 4);
        out += field;
    }
    return out;
}

std::size_t body_length(std::string_view prefix) {
    const std::size_t length = static_cast<std::size_t>(Reader(prefix.substr(0, prefix_bytes)).number(4, "a length"));
    if (length > max_body_bytes)
        throw MalformedMessage(fmt::format("a store message announces {} bytes; the limit is {}", length,
                                           max_body_bytes));
    if (length < fixed_body_bytes)
        throw MalformedMessage(fmt::format("a store message announces {} bytes; the smallest has {}", length,
                                           fixed_body_bytes));
    return length;
}

Message decode_body(std::string_view body) {
    Reader in(body);
    Message message;
    const auto tag = in.number(1, "the tag");
    if (tag > static_cast<std::uint8_t>(Tag::leave))
        throw MalformedMessage(fmt::format("unknown store message tag {}", tag));
    message.tag = static_cast<Tag>(tag);
    message.number = static_cast<std::int64_t>(in.number(8, "the number"));
    const std::size_t count = static_cast<std::size_t>(in.number(4, "the field count"));
    // Every field takes at least its 4-byte length: a count the body cannot hold is refused
    // before anything is reserved for it.
    if (count > max_fields || count > in.left() / 4)
        throw MalformedMessage(fmt::format("a store message announces {} fields in {} bytes", count, in.left()));
    message.fields.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        const std::size_t size = static_cast<std::size_t>(in.number(4, "a field's length"));
        message.fields.push_back(in.bytes(size, "a field"));
    }
    if (in.left() != 0)
        throw MalformedMessage(fmt::format("a store message has {} bytes after its last field", in.left()));
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

}  // namespace mpify::detail::store
