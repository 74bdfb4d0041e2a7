#pragma once
// Large arguments travel once: the caller writes them into a sealed memfd that every
// worker receives as fd 4 and maps copy-on-write, instead of sending one copy per worker
// through its channel; tensors among them are used where they lie (in_place_bytes.hpp).
// (Results stay on the channels: each rank has its own.)
#include "common/unique_fd.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace mpify::detail {

/// A sealed memfd holding `bytes`; an invalid fd when shared memory cannot hold them in
/// this process (the channels carry them then): a file size limit (RLIMIT_FSIZE) below
/// their size, whose SIGXFSZ would kill the caller, or no memfd_create (an old kernel, a
/// seccomp filter). Throws SpawnError when memory for them is lacking.
UniqueFd share_arguments(const std::string& bytes);

/// The worker's private, copy-on-write view of arguments shared this way; unmapped on
/// destruction.
class MappedArguments {
public:
    /// Maps `size` bytes of `fd` and closes `fd`. Throws std::system_error.
    MappedArguments(int fd, std::size_t size);
    ~MappedArguments();
    MappedArguments(const MappedArguments&) = delete;
    MappedArguments& operator=(const MappedArguments&) = delete;
    std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

private:
    void* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace mpify::detail
