#include "wire/messages.hpp"

#include "common/byte_codec.hpp"
#include "wire/frames.hpp"

#include <stdexcept>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

using Reader = ByteReader<std::runtime_error>;

}  // namespace

std::string encode_call_meta(const CallMeta& meta) {
    ByteWriter w;
    w.str(meta.mpify_version);
    w.u32(static_cast<std::uint32_t>(meta.rank));
    w.u32(static_cast<std::uint32_t>(meta.world_size));
    w.u32(meta.want_result ? 1 : 0);
    w.str(meta.function);
    w.str(meta.signature);
    w.str(meta.library);
    w.str(meta.context_key);
    w.str(meta.context_library);
    w.u64(meta.shared_args_size);
    return w.take();
}

CallMeta decode_call(std::string_view payload, std::string_view& args) {
    Reader r(payload, "mpify: a call on the channel");
    CallMeta meta;
    meta.mpify_version = r.str("the mpify version");
    meta.rank = static_cast<std::int32_t>(r.u32("the rank"));
    meta.world_size = static_cast<std::int32_t>(r.u32("the world size"));
    meta.want_result = r.u32("the result flag") != 0;
    meta.function = r.str("the function");
    meta.signature = r.str("its signature");
    meta.library = r.str("its library");
    meta.context_key = r.str("the context");
    meta.context_library = r.str("the context's library");
    meta.shared_args_size = r.u64("the size of the shared arguments");
    args = payload.substr(r.position());
    return meta;
}

std::string call_version(std::string_view payload) {
    return Reader(payload, "mpify: a call on the channel").str("the mpify version");
}

std::string call_frame_head(const CallMeta& meta, std::size_t args_size) {
    const std::string encoded = encode_call_meta(meta);
    return frame_header(FrameType::call, encoded.size() + args_size) + encoded;
}

std::string encode_failure(const FailureInfo& failure) {
    ByteWriter w;
    w.str(failure.type);
    w.str(failure.what);
    w.i64(failure.when_ns);
    return w.take();
}

FailureInfo decode_failure(std::string_view payload) {
    Reader r(payload, "mpify: a failure report on the channel");
    FailureInfo failure;
    failure.type = r.str("the exception's type");
    failure.what = r.str("its message");
    failure.when_ns = r.i64("when it was thrown");
    r.expect_end();
    return failure;
}

MPIFY_END_DETAIL_NAMESPACE
