#pragma once
// Values <-> byte strings ("blobs") with Boost binary archives. Arguments and results
// cross the channel as blobs; both ends are the same build on the same machine, so the
// archives skip their header (no_header) and are read back by the same code.
//
// Which types can be written is up to Boost.Serialization: <mpify/std_types.hpp> (part
// of <mpify/mpify.hpp>) adds the standard containers, tuple, optional and variant.
#include <mpify/export.hpp>

#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>

#include <streambuf>
#include <string>
#include <string_view>

namespace mpify {
namespace detail {

/// A streambuf that appends to a std::string: no ostringstream copy at the end.
/// Defined in libmpify, which backs large blobs with memory that is cheap to fill.
class MPIFY_API BlobSink : public std::streambuf {
public:
    explicit BlobSink(std::string& out) : out_(out) {}

protected:
    int_type overflow(int_type ch) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;

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
        BlobSink sink(out);
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
