#pragma once
// The byte layout of mpify's small internal messages (a call's metadata, a failure, a
// request to the warm template): fixed-width numbers in host order and length-prefixed
// strings. Both ends are the same build on the same machine.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mpify::detail {

/// Appends numbers and length-prefixed strings to a message.
class WireWriter {
public:
    void u32(std::uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
    void i64(std::int64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
    void str(std::string_view s) {
        u32(static_cast<std::uint32_t>(s.size()));
        out_.append(s.data(), s.size());
    }
    std::string take() { return std::move(out_); }

private:
    std::string out_;
};

/// Reads them back in the same order; throws std::runtime_error past the end.
class WireReader {
public:
    explicit WireReader(std::string_view in) : in_(in) {}
    std::uint32_t u32() { return number<std::uint32_t>(); }
    std::int64_t i64() { return number<std::int64_t>(); }
    std::string str() {
        const std::uint32_t size = u32();
        need(size);
        std::string s(in_.substr(pos_, size));
        pos_ += size;
        return s;
    }
    std::size_t position() const { return pos_; }

private:
    template <class T>
    T number() {
        need(sizeof(T));
        T v;
        std::memcpy(&v, in_.data() + pos_, sizeof v);
        pos_ += sizeof v;
        return v;
    }
    void need(std::size_t n) const {
        if (in_.size() - pos_ < n) throw std::runtime_error("mpify: truncated message on the channel");
    }
    std::string_view in_;
    std::size_t pos_ = 0;
};

}  // namespace mpify::detail
