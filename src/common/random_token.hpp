#pragma once
// Secrets that only those told can know: names of private sockets, the proofs a group's
// ranks exchange over their connections.
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// 128 random bits from the kernel (getrandom), as 32 hexadecimal digits. Throws Error
/// saying what the token was for (`purpose`: "the group's socket name") if the kernel
/// has none to give.
std::string random_token(const char* purpose);

MPIFY_END_DETAIL_NAMESPACE
