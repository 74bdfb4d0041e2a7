// The compiled half of include/mpify/detail/blob.hpp: where serialized arguments and
// results are written. A large blob grows into huge-page-backed memory (large_buffers.hpp).
// (Its reading half, the blob a thread reads, is in in_place_bytes.cpp.)
#include "wire/large_buffers.hpp"

#include <mpify/detail/blob.hpp>

#include <algorithm>

namespace mpify::detail {
namespace {

thread_local BlobSink* writing = nullptr;  // the innermost sink alive on this thread

}  // namespace

BlobSink::BlobSink(std::string& out) : out_(out), outer_(writing) { writing = this; }

BlobSink::~BlobSink() { writing = outer_; }

std::size_t blob_write_offset() noexcept { return writing != nullptr ? writing->size() : 0; }

BlobSink::int_type BlobSink::overflow(int_type ch) {
    if (!traits_type::eq_int_type(ch, traits_type::eof())) out_.push_back(static_cast<char>(ch));
    return traits_type::not_eof(ch);
}

std::streamsize BlobSink::xsputn(const char* s, std::streamsize n) {
    const std::size_t needed = out_.size() + static_cast<std::size_t>(n);
    if (needed > out_.capacity()) reserve_large(out_, std::max(needed, 2 * out_.capacity()));
    out_.append(s, static_cast<std::size_t>(n));
    return n;
}

}  // namespace mpify::detail
