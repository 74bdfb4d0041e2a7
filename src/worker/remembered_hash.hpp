#pragma once
// An agent's memory of the hashes of the libraries at their paths on its machine: every
// call offers the function's library, and an agent is a fresh process each time, so what
// it learnt is kept in the user's private cache, one small file per path, and believed
// only while the file is the same version (common/file_version.hpp).
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// The SHA-256 of the file at `path` (common/content_hash.hpp): remembered when the file
/// has not changed since it was last hashed here, else read and hashed (and remembered).
/// Throws std::system_error when the file cannot be read; a cache that cannot be used
/// only costs the hashing.
std::string remembered_content_hash(const std::string& path);

MPIFY_END_DETAIL_NAMESPACE
