#include "common/environment_number.hpp"

#include <mpify/error.hpp>

#include <cerrno>
#include <cstdlib>
#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE

long long environment_number(const char* name, long long fallback, Malformed on_malformed, const char* who,
                             long long smallest, long long largest) {
    return whole_number_of(name, std::getenv(name), fallback, on_malformed, who, smallest, largest);
}

long long whole_number_of(const char* name, const char* text, long long fallback, Malformed on_malformed,
                          const char* who, long long smallest, long long largest) {
    if (text == nullptr || *text == '\0') return fallback;
    char* end = nullptr;
    errno = 0;
    const long long value = std::strtoll(text, &end, 10);
    if (*end == '\0' && errno == 0 && value >= smallest && value <= largest) return value;
    if (on_malformed == Malformed::use_fallback) return fallback;
    throw UsageError(fmt::format("{}: {}='{}' is not a whole number from {} to {}; set it right or unset it", who, name,
                                 text, smallest, largest));
}

MPIFY_END_DETAIL_NAMESPACE
