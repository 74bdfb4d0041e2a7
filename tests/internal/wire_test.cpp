// The channel's framing and messages, without processes: frames survive any split of
// the byte stream, and what is encoded decodes to the same.
#include "wire/frames.hpp"
#include "wire/messages.hpp"

#include <catch2/catch.hpp>

using mpify::detail::Frame;
using mpify::detail::FrameParser;
using mpify::detail::FrameType;

namespace {
std::string frame_bytes(FrameType type, const std::string& payload) {
    return mpify::detail::frame_header(type, payload.size()) + payload;
}
}  // namespace

TEST_CASE("frames are reassembled whatever the size of the pieces they arrive in", "[wire]") {
    const std::string big(300000, 'b');
    const std::string stream = frame_bytes(FrameType::result, "first") + frame_bytes(FrameType::result, "") +
                               frame_bytes(FrameType::failure, big) + frame_bytes(FrameType::result, "last");
    for (std::size_t piece :
         {std::size_t{1}, std::size_t{2}, std::size_t{9}, std::size_t{10}, std::size_t{4096}, stream.size()}) {
        INFO("piece size " << piece);
        FrameParser parser;
        std::vector<Frame> frames;
        for (std::size_t at = 0; at < stream.size(); at += piece) {
            parser.append(stream.data() + at, std::min(piece, stream.size() - at));
            for (Frame f; parser.next(f);) frames.push_back(std::move(f));
        }
        REQUIRE(frames.size() == 4);
        CHECK(frames[0].payload == "first");
        CHECK(frames[1].payload.empty());
        CHECK(frames[2].type == FrameType::failure);
        CHECK(frames[2].payload == big);
        CHECK(frames[3].payload == "last");
    }
}

TEST_CASE("a call's metadata and arguments decode to what was encoded", "[wire]") {
    mpify::detail::CallMeta meta;
    meta.rank = 3;
    meta.world_size = 5;
    meta.want_result = false;
    meta.function = "ns::train";
    meta.signature = "PFdiE";
    meta.library = "/tmp/libx.so";
    meta.mpify_version = "0.1.0";
    meta.context_key = "N5mpify8DdpGuardE";
    meta.context_library = "/opt/mpify/lib/libmpify_torch.so.0";
    const std::string args("\0args\0", 6);
    const std::string payload = mpify::detail::encode_call_meta(meta) + args;
    std::string_view decoded_args;
    const auto decoded = mpify::detail::decode_call(payload, decoded_args);
    CHECK(decoded.rank == 3);
    CHECK(decoded.world_size == 5);
    CHECK_FALSE(decoded.want_result);
    CHECK(decoded.function == meta.function);
    CHECK(decoded.signature == meta.signature);
    CHECK(decoded.library == meta.library);
    CHECK(decoded.context_key == meta.context_key);
    CHECK(decoded.mpify_version == meta.mpify_version);
    CHECK(mpify::detail::call_version(payload) == "0.1.0");
    CHECK(decoded.context_library == meta.context_library);
    CHECK(decoded_args == args);
}

TEST_CASE("a truncated message is an error and not a crash", "[wire]") {
    const std::string payload = mpify::detail::encode_failure({"std::runtime_error", "boom", 123});
    CHECK(mpify::detail::decode_failure(payload).what == "boom");
    CHECK(mpify::detail::decode_failure(payload).when_ns == 123);
    CHECK_THROWS_WITH(mpify::detail::decode_failure(payload.substr(0, payload.size() - 2)),
                      Catch::Contains("truncated"));
    // Bytes after the report are not a report of this mpify's: refused, as by every decoder.
    CHECK_THROWS(mpify::detail::decode_failure(payload + "x"));
}

TEST_CASE("a call frame built for arguments sent apart arrives as one call", "[wire]") {
    mpify::detail::CallMeta meta;
    meta.rank = 1;
    meta.function = "square";
    const std::string args = "the arguments";
    const std::string stream = mpify::detail::call_frame_head(meta, args.size()) + args;
    FrameParser parser;
    parser.append(stream.data(), stream.size());
    Frame frame;
    REQUIRE(parser.next(frame));
    CHECK(frame.type == FrameType::call);
    std::string_view decoded_args;
    CHECK(mpify::detail::decode_call(frame.payload, decoded_args).function == "square");
    CHECK(decoded_args == args);
    CHECK_FALSE(parser.next(frame));
}
