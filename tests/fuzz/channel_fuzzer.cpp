// libFuzzer target: bytes on a worker's channel as the caller reads them (frames in
// arbitrary pieces), and the call and failure messages inside frames. Malformed input is
// an exception, never a crash, an overread or an allocation the bytes do not justify.
#include "wire/frames.hpp"
#include "wire/messages.hpp"

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

using namespace mpify::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const char* bytes = reinterpret_cast<const char*>(data);
    // The first byte chooses the size of the pieces the rest arrives in.
    const std::size_t piece = 1 + static_cast<unsigned char>(bytes[0]);
    FrameParser parser;
    try {
        for (std::size_t at = 1; at < size; at += piece) {
            parser.append(bytes + at, std::min(piece, size - at));
            for (Frame frame; parser.next(frame);) {
                std::string_view args;
                try {
                    const CallMeta meta = decode_call(frame.payload, args);
                    if (args.size() > frame.payload.size()) std::abort();
                    std::string_view again_args;
                    const std::string again = encode_call_meta(meta) + std::string(args);
                    if (decode_call(again, again_args).function != meta.function || again_args != args) std::abort();
                } catch (const std::runtime_error&) {
                }
                try {
                    const FailureInfo failure = decode_failure(frame.payload);
                    if (failure.what.size() > frame.payload.size()) std::abort();
                } catch (const std::runtime_error&) {
                }
            }
        }
    } catch (const std::runtime_error&) {  // a frame the parser refuses
    }
    return 0;
}
