#include "common/printable.hpp"

#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE

std::string printable(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto byte = static_cast<unsigned char>(text[i]);
        const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
        if (byte == 0xc2 && next >= 0x80 && next <= 0x9f) {  // U+0080..U+009F, C1 controls (CSI...)
            out += fmt::format("\\u{:04x}", next);
            ++i;
        } else if ((byte < 0x20 && byte != '\n' && byte != '\t') || byte == 0x7f) {
            out += fmt::format("\\x{:02x}", byte);
        } else {
            out += text[i];
        }
    }
    return out;
}

MPIFY_END_DETAIL_NAMESPACE
