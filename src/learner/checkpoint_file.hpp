#pragma once
// A checkpoint's bytes on disk: written so that a crash at any moment leaves either the
// previous file or the new one, whole; read with errors that name the file.
#include "learner/checksum_frame.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

MPIFY_BEGIN_NAMESPACE
namespace learner {

/// Replaces `path` with `bytes` atomically: a temporary file beside it, written and
/// flushed to disk, renamed over `path`, the folder flushed. The previous file stays
/// until the new one is whole. Temporaries of `path` left by writers that died on this
/// machine are removed first. Throws std::runtime_error naming the folder and the
/// system's reason (disk full, read-only, no permission); the temporary is removed.
void write_file_atomically(const std::string& path, const std::string& bytes);

/// Where a writer gives its bytes, in pieces.
using ByteSink = std::function<void(const char* data, std::size_t n)>;

/// Replaces `path` atomically, as write_file_atomically does, with a framed payload
/// (checksum_frame.hpp): the bytes that `write_payload` gives its sink, in any number of
/// pieces, go to the file as they come, never all in memory at once.
void write_framed_file_atomically(const std::string& path, const std::function<void(const ByteSink&)>& write_payload);

/// Creates `folder` (and its parents) if needed and checks that files can be written
/// there, before any training is at stake. Throws std::runtime_error naming it.
void check_writable_folder(const std::string& folder);

/// A checkpoint's bytes as a load reads them, in pieces: from its file (so that a load
/// needs no copy of the whole file in memory), or from memory (a copy that rank 0 sent).
/// Copies share the file or the memory.
class CheckpointBytes {
public:
    /// The file at `path`, opened: a regular file, its size as it is now (never read
    /// further). Throws std::runtime_error naming it when it cannot be opened or is a
    /// FIFO, a device, a socket or a folder (refused without blocking).
    static CheckpointBytes open_file(const std::string& path);

    /// `size` bytes at `data`, kept alive by `owner`, that came from `path`.
    static CheckpointBytes in_memory(const std::string& path, std::shared_ptr<const void> owner, const char* data,
                                     std::uint64_t size);

    /// The file's path, for messages.
    const std::string& path() const { return path_; }
    std::uint64_t size() const { return size_; }

    /// Reads up to `n` bytes at `offset` into `into`; returns how many (fewer only at the
    /// end, or where the file shrank since it was opened). Throws std::runtime_error
    /// naming the file on a read error.
    std::size_t read_at(std::uint64_t offset, char* into, std::size_t n) const;

    /// Where the payload lies, its frame checked (checked_payload) at the first call.
    const PayloadSpan& payload() const;

private:
    struct Source;
    std::string path_;
    std::uint64_t size_ = 0;
    std::shared_ptr<Source> source_;
};

/// `bytes` (as a file at `path` held them) in memory.
CheckpointBytes in_memory(const std::string& path, std::string bytes);

}  // namespace learner
MPIFY_END_NAMESPACE
