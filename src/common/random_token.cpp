#include "common/random_token.hpp"

#include <mpify/error.hpp>

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE

std::string random_token(const char* purpose) {
    unsigned char bytes[16];
    if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes))
        throw Error(fmt::format("mpify: no random bytes for {}: {}", purpose, std::strerror(errno)));
    std::string token;
    for (const unsigned char byte : bytes) token += fmt::format("{:02x}", byte);
    return token;
}

MPIFY_END_DETAIL_NAMESPACE
