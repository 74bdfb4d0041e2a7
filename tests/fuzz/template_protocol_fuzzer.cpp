// libFuzzer target: the messages between a caller and its warm template (a request to
// fork a worker, the template's reply). Malformed bytes are a runtime_error, never a
// crash or an allocation the bytes do not justify.
#include "contract/template_protocol.hpp"

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

using namespace mpify::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    try {
        const ForkRequest request = decode_fork_request(bytes);
        if (request.env.size() > size / 4) std::abort();
    } catch (const std::runtime_error&) {
    }
    try {
        const TemplateReply reply = decode_reply(bytes);
        if (reply.status > last_template_status || reply.message.size() > size) std::abort();
    } catch (const std::runtime_error&) {
    }
    return 0;
}
