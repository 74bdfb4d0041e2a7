// libFuzzer target: what a remote rank's connection reads from the network. The first
// byte chooses the reader:
//   0    the caller's check of a worker's answer (common/secret_handshake), what a
//        stranger on the caller's port reaches before any proof: it must refuse every
//        input (a fuzzer does not forge an HMAC-SHA256);
//   1    a call's secret as the launcher's environment gives it (CallSecret::from_hex):
//        refused, or read back as the same 64 hex digits;
//   else the link's messages after the proof (contract/remote_link): bytes cut into
//        pieces where the input says, reassembled by LinkReader, and each message's
//        payload read by its type's decoder; what a decoder accepts encodes back to
//        what it read.
#include "common/secret_handshake.hpp"
#include "contract/remote_link.hpp"

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

namespace {

using namespace mpify::detail;

void must(bool condition) {
    if (!condition) std::abort();
}

void check_answer(std::string_view input) {
    static const CallSecret secret = CallSecret::from_hex(std::string(64, '7'));
    WorkerAdmission admission(secret);
    try {
        admission.check(input, 4);
    } catch (const HandshakeRefused&) {
        return;
    }
    std::abort();  // admitted without the secret
}

void check_secret(std::string_view input) {
    try {
        const CallSecret secret = CallSecret::from_hex(input);
        std::string lower(input);
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        must(secret.hex() == lower);
    } catch (const std::invalid_argument&) {
    }
}

// Each decoder's view of a payload, and the round trip of what it accepts.
void decode(const LinkMessage& message) {
    const std::string& payload = message.payload;
    must(payload.size() <= max_link_payload);
    try {
        switch (message.type) {
            case LinkType::hello: {
                const AgentHello hello = decode_hello(payload);
                // Without a LibTorch version the older hello reads the same; with one, all of it.
                const std::string again = encode_hello(hello);
                must(again == payload || (hello.torch_version.empty() && again.rfind(payload, 0) == 0));
                break;
            }
            case LinkType::start: {  // names in any order: the same variables again
                const auto variables = decode_start(payload);
                must(decode_start(encode_start(variables)) == variables);
                break;
            }
            case LinkType::library: must(encode_offer(decode_offer(payload)) == payload); break;
            case LinkType::library_here: must(encode_here(decode_here(payload)) == payload); break;
            case LinkType::exited: {
                const WorkerEnd end = decode_end(payload);
                must(decode_end(encode_end(end)).status == end.status);
                break;
            }
            case LinkType::started:
            case LinkType::signal: must(encode_number(decode_number(payload, "a number")) == payload); break;
            default: break;  // bytes for the worker's channel or output, or nothing
        }
    } catch (const std::runtime_error&) {
    }
}

void check_link(std::string_view input) {
    LinkReader reader;
    LinkMessage message;
    // The input's bytes in pieces: each piece's length is its first byte (at least 1).
    std::size_t at = 0;
    try {
        while (at < input.size()) {
            const std::size_t piece = 1 + static_cast<unsigned char>(input[at]);
            const std::string_view bytes = input.substr(at + 1, piece);
            reader.append(bytes.data(), bytes.size());
            at += 1 + bytes.size();
            while (reader.next(message)) decode(message);
        }
    } catch (const std::runtime_error&) {  // an unknown type or an oversized payload
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0]) {
        case 0: check_answer(input); break;
        case 1: check_secret(input); break;
        default: check_link(input); break;
    }
    return 0;
}
