#pragma once
// Values <-> byte strings ("blobs") with Boost binary archives. Arguments and results
// cross the channel as blobs; both ends are the same build on the same machine, so the
// archives skip their header (no_header) and are read back by the same code.
#include <mpify/std_types.hpp>

#include <mpify/export.hpp>

#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>

#include <algorithm>
#include <streambuf>
#include <string>
#include <string_view>

namespace mpify {
namespace detail {

/// Asks the kernel to back [data, data + size) with transparent huge pages.
MPIFY_API void advise_huge_pages(void* data, std::size_t size) noexcept;
/// Reserves `capacity` in `buffer`, backed by huge pages when it is large: first
/// touching fresh memory is the main cost of shipping large arguments.
MPIFY_API void reserve_large(std::string& buffer, std::size_t capacity);

/// A streambuf that appends to a std::string: no ostringstream copy at the end.
class StringSink : public std::streambuf {
public:
    explicit StringSink(std::string& out) : out_(out) {}

protected:
    int_type overflow(int_type ch) override {
        if (!traits_type::eq_int_type(ch, traits_type::eof())) out_.push_back(static_cast<char>(ch));
        return traits_type::not_eof(ch);
    }
    std::streamsize xsputn(const char* s, std::streamsize n) override {
        const std::size_t needed = out_.size() + static_cast<std::size_t>(n);
        if (needed > out_.capacity()) reserve_large(out_, std::max(needed, 2 * out_.capacity()));
        out_.append(s, static_cast<std::size_t>(n));
        return n;
    }

private:
    std::string& out_;
};

/// A streambuf reading a byte range in place: no copy of a large argument.
class ViewSource : public std::streambuf {
public:
    explicit ViewSource(std::string_view bytes) {
        char* begin = const_cast<char*>(bytes.data());  // only ever read
        setg(begin, begin, begin + bytes.size());
    }
};

constexpr unsigned archive_flags = boost::archive::no_header | boost::archive::no_codecvt;

/// Serializes each value in order into one blob.
template <class... T>
std::string to_blob(const T&... values) {
    std::string out;
    {
        StringSink sink(out);
        boost::archive::binary_oarchive archive(sink, archive_flags);
        if constexpr (sizeof...(T) > 0) (archive << ... << values);
    }
    return out;
}

/// Reads values written by to_blob, in the same order.
template <class... T>
void from_blob(std::string_view blob, T&... values) {
    ViewSource source(blob);
    boost::archive::binary_iarchive archive(source, archive_flags);
    if constexpr (sizeof...(T) > 0) (archive >> ... >> values);
}

}  // namespace detail
}  // namespace mpify
