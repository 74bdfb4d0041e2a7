#pragma once
// Large arguments travel once: the caller writes them into a memfd that every worker
// receives as fd 4 and maps copy-on-write, instead of sending one copy per worker through
// its channel; tensors among them are used where they lie (in_place_bytes.hpp).
// (Results stay on the channels: each rank has its own.)
#include "common/unique_fd.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// One call's arguments in shared memory, for its workers.
///
/// The process keeps the memfd from one call to the next: the kernel's allocating the
/// 4 KiB pages of a fresh memfd and freeing them after cost more than the copy itself
/// (benchmarks/README.md, "Shipping large arguments"). What is kept is at most the
/// largest arguments shipped lately, and nothing above a sixteenth of the machine's memory
/// or with MPIFY_KEEP_SHARED_ARGUMENTS=0.
///
/// Rewriting a kept memfd changes what any mapping of it still reads, so an object must
/// be destroyed only once every worker given its fd has exited (the call's supervisor has
/// reaped them): the memfd is then free for the next call.
class SharedArguments {
public:
    /// None: fd() is -1.
    SharedArguments() = default;
    /// Shared memory to append() `size` bytes of arguments to (SIZE_MAX: a size not known
    /// yet): the memfd kept from an earlier call, else a new one. None when shared memory
    /// cannot hold them in this process (the channels carry them then): a file size limit
    /// (RLIMIT_FSIZE) below `size`, whose SIGXFSZ would kill the caller, or no
    /// memfd_create (an old kernel, a seccomp filter). Throws SpawnError when the kernel
    /// refuses a memfd for another reason.
    static SharedArguments open(std::size_t size);
    /// `bytes` in shared memory, as open(), append() and finish() give them; or none.
    explicit SharedArguments(const std::string& bytes);
    /// Gives the memfd back to the process for the next call, or frees it.
    ~SharedArguments();
    SharedArguments(SharedArguments&& other) noexcept;
    SharedArguments& operator=(SharedArguments&& other) noexcept;

    /// Writes `size` more bytes of the arguments. Throws SpawnError when memory for them
    /// is lacking. Only on an object that is not none.
    void append(const char* data, std::size_t size);
    /// Once every byte is written: a kept memfd much longer than these arguments gives
    /// back the pages they leave unused.
    void finish();

    /// The memfd to give each worker as fd 4; -1 when there is none.
    int fd() const { return fd_.get(); }
    /// How many bytes of it hold the arguments (the file may be longer).
    std::size_t size() const { return size_; }

private:
    explicit SharedArguments(UniqueFd fd) : fd_(std::move(fd)) {}

    UniqueFd fd_;
    std::size_t size_ = 0;
};

/// The environment variable that, set to 0, frees every call's memfd after it.
constexpr const char* keep_shared_arguments_var = "MPIFY_KEEP_SHARED_ARGUMENTS";

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

MPIFY_END_DETAIL_NAMESPACE
