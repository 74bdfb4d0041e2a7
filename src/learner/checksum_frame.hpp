#pragma once
// The frame around a checkpoint's (or an export's) bytes on disk: a magic, the payload's
// length and its CRC-32, then the payload. LibTorch's archive reader checks no checksum,
// so without it a flipped bit in a parameter loads as a wrong weight; with it a damaged
// or cut file is found before anything in it is used.
#include <mpify/abi.hpp>

#include <string>
#include <string_view>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// `payload` in its frame.
std::string framed(const std::string& payload);

/// The payload of the framed `bytes` (of file `path`, for messages), once its length and
/// checksum agree with the frame; `bytes` themselves when they carry no frame (files of
/// format 1, written before frames). Throws std::runtime_error naming `path` and what is
/// wrong when they do not agree.
std::string_view unframed(const std::string& path, const std::string& bytes);

}  // namespace learner
MPIFY_END_NAMESPACE
