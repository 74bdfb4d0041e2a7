#pragma once
// The one byte layout of mpify's own messages (a call's metadata, a failure, the warm
// template's requests and replies, the rendezvous store's messages): little-endian
// fixed-width numbers and length-prefixed strings, read with every length checked
// against the bytes that are there. Decoders read bytes a stranger may have written
// (the store listens on a network), so nothing is read, or reserved, past the end.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Appends numbers and strings to a message.
class ByteWriter {
public:
    void u8(std::uint8_t v) { put(v, 1); }
    void u32(std::uint32_t v) { put(v, 4); }
    void u64(std::uint64_t v) { put(v, 8); }
    void i64(std::int64_t v) { put(static_cast<std::uint64_t>(v), 8); }
    /// A string as its 4-byte length, then its bytes.
    void str(std::string_view s) {
        u32(static_cast<std::uint32_t>(s.size()));
        out_.append(s.data(), s.size());
    }
    std::size_t size() const { return out_.size(); }
    std::string take() { return std::move(out_); }

private:
    void put(std::uint64_t value, int bytes) {
        for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
    }
    std::string out_;
};

/// Reads what ByteWriter wrote, in the same order. Any read past the end, an announced
/// count the rest cannot hold, or bytes left at expect_end throw Error (an exception
/// type constructed from a message) saying what was being read and how many bytes were
/// left, in `message`, e.g. "a store message".
template <class Error>
class ByteReader {
public:
    ByteReader(std::string_view bytes, const char* message) : rest_(bytes), size_(bytes.size()), message_(message) {}

    std::uint8_t u8(const char* what) { return static_cast<std::uint8_t>(number(1, what)); }
    std::uint32_t u32(const char* what) { return static_cast<std::uint32_t>(number(4, what)); }
    std::uint64_t u64(const char* what) { return number(8, what); }
    std::int64_t i64(const char* what) { return static_cast<std::int64_t>(number(8, what)); }
    /// A string written by ByteWriter::str.
    std::string str(const char* what) { return bytes(u32(what), what); }
    /// `size` bytes as they are.
    std::string bytes(std::size_t size, const char* what) {
        need(size, what);
        std::string value(rest_.substr(0, size));
        rest_.remove_prefix(size);
        return value;
    }
    /// A 4-byte count of items that take at least `smallest_item` bytes each, at most
    /// `limit`: a count the rest cannot hold is refused before anything is reserved for it.
    std::size_t count(const char* items, std::size_t smallest_item, std::size_t limit) {
        const std::size_t n = u32(items);
        if (n > limit || n > rest_.size() / smallest_item)
            throw Error(fmt::format("{} announces {} {} in {} bytes", message_, n, items, rest_.size()));
        return n;
    }
    /// Throws unless every byte has been read.
    void expect_end() const {
        if (!rest_.empty()) throw Error(fmt::format("{} has {} bytes after its last field", message_, rest_.size()));
    }
    std::size_t left() const { return rest_.size(); }
    std::size_t position() const { return size_ - rest_.size(); }

private:
    std::uint64_t number(int bytes, const char* what) {
        need(static_cast<std::size_t>(bytes), what);
        std::uint64_t value = 0;
        for (int i = 0; i < bytes; ++i) value |= std::uint64_t(static_cast<unsigned char>(rest_[i])) << (8 * i);
        rest_.remove_prefix(static_cast<std::size_t>(bytes));
        return value;
    }
    void need(std::size_t size, const char* what) const {
        if (size > rest_.size())
            throw Error(fmt::format("{}: {} needs {} bytes but {} are left (truncated)", message_, what, size,
                                    rest_.size()));
    }
    std::string_view rest_;
    std::size_t size_;
    const char* message_;
};

MPIFY_END_DETAIL_NAMESPACE
