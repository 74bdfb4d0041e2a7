#pragma once
// Values <-> byte strings ("blobs") with Boost binary archives. Arguments and results
// cross the channel as blobs; both ends are the same build on the same machine, so the
// archives skip their header (no_header) and are read back by the same code.
//
// Which types can be written is up to Boost.Serialization: <mpify/std_types.hpp> (part
// of <mpify/mpify.hpp>) adds the standard containers, tuple, optional and variant.
#include <mpify/abi.hpp>
#include <mpify/export.hpp>

#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <string_view>

MPIFY_BEGIN_NAMESPACE
namespace detail {

class SharedArguments;  // libmpify's shared memory for a call's large arguments

/// A streambuf that appends to a std::string: no ostringstream copy at the end.
/// Defined in libmpify, which backs large blobs with memory that is cheap to fill.
/// While it exists it is its thread's blob being written (blob_write_offset()).
///
/// A sink for a call's arguments may spill: once the blob reaches its `spill_at` bytes,
/// what was written and everything after goes into shared memory for the workers
/// (finish_spill()), so that a large argument is copied once, from where it lies.
class MPIFY_API BlobSink : public std::streambuf {
public:
    explicit BlobSink(std::string& out) : BlobSink(out, SIZE_MAX) {}
    /// Spills into shared memory from `spill_at` bytes (SIZE_MAX: never).
    BlobSink(std::string& out, std::size_t spill_at);
    ~BlobSink() override;
    BlobSink(const BlobSink&) = delete;
    BlobSink& operator=(const BlobSink&) = delete;
    /// Bytes written so far, spilled or not.
    std::size_t size() const { return spilled_ + out_.size(); }
    /// Once every value is written: the shared memory holding the whole blob, `out` left
    /// empty; null when the blob did not spill (`out` holds it). Throws SpawnError when
    /// memory for the blob is lacking.
    std::shared_ptr<SharedArguments> finish_spill();

protected:
    int_type overflow(int_type ch) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;

private:
    void spill();                 // moves `out` into shared memory and writes there from now on
    void flush_to_spill();        // writes what `out` gathered since into the shared memory

    std::string& out_;            // the blob, or after spilling a few small writes not yet spilled
    BlobSink* outer_;             // the sink this one interrupted on its thread, if any
    std::size_t spill_at_;
    std::size_t spilled_ = 0;     // bytes in shared memory
    std::shared_ptr<SharedArguments> shared_;
};

/// Where the next value written on this thread starts in its blob: the size of the
/// innermost BlobSink alive on this thread (0 when there is none). Values whose bytes
/// may be used in place (tensors) align them with it.
MPIFY_API std::size_t blob_write_offset() noexcept;

/// A streambuf reading a byte range in place: no copy of a large argument.
class ViewSource : public std::streambuf {
public:
    explicit ViewSource(std::string_view bytes) {
        char* begin = const_cast<char*>(bytes.data());  // only ever read
        setg(begin, begin, begin + bytes.size());
    }
    /// Bytes not read yet.
    std::size_t unread() const { return static_cast<std::size_t>(egptr() - gptr()); }
    /// The next `n` bytes, now counted as read; the caller checked that unread() >= n.
    const char* take(std::size_t n) {
        char* at = gptr();
        setg(eback(), at + n, egptr());
        return at;
    }
};

/// Makes `source` its thread's blob being read while it exists (the outer one again
/// after): what lets a value's loader take its bytes in place (wire/in_place_bytes.hpp).
class MPIFY_API ReadingBlob {
public:
    explicit ReadingBlob(ViewSource& source);
    ~ReadingBlob();
    ReadingBlob(const ReadingBlob&) = delete;
    ReadingBlob& operator=(const ReadingBlob&) = delete;

private:
    ViewSource* outer_;
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

/// Serializes a call's arguments like to_blob; once they reach `spill_at` bytes they go
/// into shared memory instead (`shared`, the string returned empty). Throws SpawnError
/// when memory for them is lacking.
template <class... T>
std::string to_arguments_blob(std::size_t spill_at, std::shared_ptr<SharedArguments>& shared, const T&... values) {
    std::string out;
    BlobSink sink(out, spill_at);
    {
        boost::archive::binary_oarchive archive(sink, archive_flags);
        if constexpr (sizeof...(T) > 0) (archive << ... << values);
    }
    shared = sink.finish_spill();
    return out;
}

/// Reads values written by to_blob, in the same order. Every byte must be read: bytes
/// left over mean the two ends disagree about the types (std::runtime_error says how
/// many); a blob too short or malformed gives Boost's archive_exception.
template <class... T>
void from_blob(std::string_view blob, T&... values) {
    ViewSource source(blob);
    const ReadingBlob reading(source);
    boost::archive::binary_iarchive archive(source, archive_flags);
    if constexpr (sizeof...(T) > 0) (archive >> ... >> values);
    if (source.unread() != 0)
        throw std::runtime_error(std::to_string(source.unread()) + " of its " + std::to_string(blob.size()) +
                                 " bytes were left over after reading every value");
}

}  // namespace detail
MPIFY_END_NAMESPACE
