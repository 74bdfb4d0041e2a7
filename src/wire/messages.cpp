#include "wire/messages.hpp"

#include "wire/frames.hpp"
#include "wire/message_codec.hpp"

namespace mpify::detail {

std::string encode_call_meta(const CallMeta& meta) {
    WireWriter w;
    w.u32(static_cast<std::uint32_t>(meta.rank));
    w.u32(static_cast<std::uint32_t>(meta.world_size));
    w.u32(meta.want_result ? 1 : 0);
    w.str(meta.function);
    w.str(meta.signature);
    w.str(meta.library);
    w.str(meta.context_key);
    w.str(meta.context_library);
    w.i64(static_cast<std::int64_t>(meta.shared_args_size));
    return w.take();
}

CallMeta decode_call(std::string_view payload, std::string_view& args) {
    WireReader r(payload);
    CallMeta meta;
    meta.rank = static_cast<std::int32_t>(r.u32());
    meta.world_size = static_cast<std::int32_t>(r.u32());
    meta.want_result = r.u32() != 0;
    meta.function = r.str();
    meta.signature = r.str();
    meta.library = r.str();
    meta.context_key = r.str();
    meta.context_library = r.str();
    meta.shared_args_size = static_cast<std::uint64_t>(r.i64());
    args = payload.substr(r.position());
    return meta;
}

std::string call_frame_head(const CallMeta& meta, std::size_t args_size) {
    const std::string encoded = encode_call_meta(meta);
    return frame_header(FrameType::call, encoded.size() + args_size) + encoded;
}

std::string encode_failure(const FailureInfo& failure) {
    WireWriter w;
    w.str(failure.type);
    w.str(failure.what);
    w.i64(failure.when_ns);
    return w.take();
}

FailureInfo decode_failure(std::string_view payload) {
    WireReader r(payload);
    FailureInfo failure;
    failure.type = r.str();
    failure.what = r.str();
    failure.when_ns = r.i64();
    return failure;
}

}  // namespace mpify::detail
