#pragma once
// A checkpoint's bytes on disk: written so that a crash at any moment leaves either the
// previous file or the new one, whole; read with errors that name the file.
#include <string>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// Replaces `path` with `bytes` atomically: a temporary file beside it, written and
/// flushed to disk, renamed over `path`, the folder flushed. The previous file stays
/// until the new one is whole. Temporaries of `path` left by writers that died on this
/// machine are removed first. Throws std::runtime_error naming the folder and the
/// system's reason (disk full, read-only, no permission); the temporary is removed.
void write_file_atomically(const std::string& path, const std::string& bytes);

/// Creates `folder` (and its parents) if needed and checks that files can be written
/// there, before any training is at stake. Throws std::runtime_error naming it.
void check_writable_folder(const std::string& folder);

/// The whole content of `path`, a regular file (read no further than its size when opened);
/// throws std::runtime_error naming it when it cannot be read or is a FIFO, a device, a
/// socket or a folder (refused without blocking).
std::string read_file(const std::string& path);

}  // namespace learner
MPIFY_END_NAMESPACE
