// The compiled half of include/mpify/detail/blob.hpp: where serialized arguments and
// results are written. A large blob grows into huge-page-backed memory (large_buffers.hpp),
// or, for a call's arguments, into the shared memory its workers map
// (shared_arguments.hpp): a tensor's elements are then copied once, from the tensor.
// (Its reading half, the blob a thread reads, is in in_place_bytes.cpp.)
#include "wire/large_buffers.hpp"
#include "wire/shared_arguments.hpp"

#include <mpify/detail/blob.hpp>

#include <algorithm>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

thread_local BlobSink* writing = nullptr;  // the innermost sink alive on this thread

// After spilling, small writes gather in the string up to this many bytes and go into
// shared memory together; larger ones go there straight from where they are.
constexpr std::size_t spill_batch = 64u << 10;

}  // namespace

BlobSink::BlobSink(std::string& out, std::size_t spill_at) : out_(out), outer_(writing), spill_at_(spill_at) {
    writing = this;
}

BlobSink::~BlobSink() { writing = outer_; }

std::size_t blob_write_offset() noexcept { return writing != nullptr ? writing->size() : 0; }

BlobSink::int_type BlobSink::overflow(int_type ch) {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    const char c = static_cast<char>(ch);
    xsputn(&c, 1);
    return ch;
}

std::streamsize BlobSink::xsputn(const char* s, std::streamsize n) {
    const auto count = static_cast<std::size_t>(n);
    if (!shared_ && size() + count >= spill_at_) spill();
    if (shared_ && (count >= spill_batch || out_.size() + count >= spill_batch)) {
        flush_to_spill();
        if (count >= spill_batch) {
            shared_->append(s, count);
            spilled_ += count;
            return n;
        }
    }
    const std::size_t needed = out_.size() + count;
    if (needed > out_.capacity()) reserve_large(out_, std::max(needed, 2 * out_.capacity()));
    out_.append(s, count);
    return n;
}

void BlobSink::spill() {
    SharedArguments opened = SharedArguments::open(SIZE_MAX);  // the size is not known yet
    if (opened.fd() < 0) {  // shared memory cannot hold them here: the channels will
        spill_at_ = SIZE_MAX;
        return;
    }
    shared_ = std::make_shared<SharedArguments>(std::move(opened));
    flush_to_spill();
}

void BlobSink::flush_to_spill() {
    shared_->append(out_.data(), out_.size());
    spilled_ += out_.size();
    out_.clear();
}

std::shared_ptr<SharedArguments> BlobSink::finish_spill() {
    if (!shared_) return nullptr;
    flush_to_spill();
    shared_->finish();
    std::string().swap(out_);  // the blob is all in shared memory: nothing kept here
    return std::move(shared_);
}

MPIFY_END_DETAIL_NAMESPACE
