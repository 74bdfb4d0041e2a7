#pragma once
// Keeping the memory of LibTorch's large CPU tensors for the next training step.
//
// A training step allocates the same large temporaries every time (activations, a
// convolution's unfolded input, gradients) and frees them by its end. LibTorch's CPU
// allocator hands them to glibc, which maps blocks over its mmap threshold fresh and
// unmaps them on free, and trims the heap's top: each step then faults every 4 KiB page
// in again, which was more than half of a small CNN's step in a process without the
// workers' huge-page tunable (benchmarks/README.md, "The caller's own rank").
//
// While a cache is installed, LibTorch's CPU allocations of `large_block_bytes` or more
// are served from blocks kept from earlier frees of the same size; new blocks are mapped
// on transparent huge pages where the kernel allows (madvise mode). What the cache holds,
// used and kept, never exceeds twice the largest amount the tensors held in use at once
// (a step needs more than its peak: its blocks of one size are not all free when a block
// of another size is wanted); beyond that the blocks kept longest unused are unmapped.
// Smaller allocations go to the allocator that was installed before.
#include <cstddef>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Allocations at least this large go through the cache: glibc's default mmap threshold,
/// below which its own heap already reuses freed memory.
constexpr std::size_t large_block_bytes = 128 * 1024;

/// Installs the cache as LibTorch's CPU allocator (nested installs are counted: the
/// outermost one acts). Thread-safe.
void install_tensor_memory_cache();

/// Undoes one install; the outermost restores the allocator that was there before and
/// unmaps every block kept unused. Tensors still alive keep their memory, which is
/// unmapped when they are freed.
void uninstall_tensor_memory_cache();

/// What the cache holds now, for tests and benchmarks.
struct TensorMemoryFigures {
    std::size_t in_use = 0;       ///< bytes of large blocks held by live tensors
    std::size_t kept = 0;         ///< bytes of large blocks kept unused for reuse
    std::size_t peak_in_use = 0;  ///< the most `in_use` has been since the outermost install
    std::size_t reused = 0;       ///< allocations served from kept blocks since then
    std::size_t mapped = 0;       ///< allocations that mapped a new block since then
};
TensorMemoryFigures tensor_memory_figures();

/// The variable by which a user turns off every cache mpify holds for them (each rank's
/// and each DdpGuard's): "0" off, "1" or unset on.
constexpr const char* tensor_memory_cache_var = "MPIFY_TENSOR_MEMORY_CACHE";

/// False when tensor_memory_cache_var is "0"; a malformed value is a UsageError naming
/// the variable, its value and `who` reads it.
bool tensor_memory_cache_allowed(const char* who);

MPIFY_END_DETAIL_NAMESPACE
