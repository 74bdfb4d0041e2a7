#pragma once
// The SHA-256 of a file's bytes (libsodium's): how a library is known on another machine
// whatever its path there, and checked after it travelled.
#include <cstddef>
#include <string>
#include <string_view>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// A SHA-256 taken over bytes given piece by piece.
class ContentHash {
public:
    static constexpr std::size_t size = 32;
    ContentHash();
    void add(std::string_view bytes);
    /// The 32 bytes of the hash of everything added; the object is spent.
    std::string finish();

private:
    alignas(64) unsigned char state_[128];  // crypto_hash_sha256_state, without sodium.h here
};

/// The SHA-256 of the file at `path`. Throws std::system_error naming the file when it
/// cannot be read.
std::string content_hash_of_file(const std::string& path);

/// `bytes` as lowercase hexadecimal digits (a hash in a file name or a message).
std::string hex_digits(std::string_view bytes);

MPIFY_END_DETAIL_NAMESPACE
