#pragma once
// TensorMemoryCache: LibTorch's large CPU tensors reuse the memory of earlier ones while
// it lives, so that a training step does not fault its temporaries in afresh each time.
//
//   double train(Config cfg) {
//       mpify::TensorMemoryCache keep;   // a DdpGuard holds one already
//       for (auto& batch : loader) { ... }
//   }
#include <mpify/abi.hpp>
#include <mpify/export.hpp>

MPIFY_BEGIN_NAMESPACE

/// The RAII scope of mpify's cache of CPU tensor memory. While one lives in the process,
/// LibTorch's CPU allocations of 128 KiB or more are served from blocks that earlier
/// tensors of the same size freed, and new blocks of 2 MiB or more are mapped on
/// transparent huge pages where the kernel allows it. Without it, glibc unmaps such blocks on free and every
/// training step pays the page faults of its temporaries again (a small CNN's step was
/// much slower). What the cache holds, in use and kept, stays within twice the most that
/// tensors held in use at once (the blocks kept longest unused go first); smaller
/// allocations go to LibTorch's allocator. Guards nest (only the outermost acts) and may
/// be made on any thread; the outermost's destruction restores LibTorch's allocator and
/// unmaps what was kept unused.
///
/// mpify holds one for you: in every rank of a ranch call while its function runs, the
/// caller's own rank included, once LibTorch is in the process (libmpify_torch is
/// loaded); and DdpGuard (so in_ddp) in every rank unless DdpOptions::cache_tensor_memory
/// is false. MPIFY_TENSOR_MEMORY_CACHE=0 in the environment turns both off.
class MPIFY_API TensorMemoryCache {
public:
    /// Starts caching; only the outermost guard of the process acts.
    TensorMemoryCache();
    /// The outermost guard's end restores LibTorch's allocator and unmaps what was kept.
    ~TensorMemoryCache();
    TensorMemoryCache(const TensorMemoryCache&) = delete;
    TensorMemoryCache& operator=(const TensorMemoryCache&) = delete;
};

MPIFY_END_NAMESPACE

/// For a program that runs other code in its own process and wants the cache around it,
/// without linking LibTorch itself (mpify-kernel holds one while each notebook cell runs,
/// found with dlsym once a cell has loaded libmpify_torch): opens a TensorMemoryCache, or
/// returns null when MPIFY_TENSOR_MEMORY_CACHE is 0 (or malformed) or it cannot be made.
extern "C" MPIFY_API void* mpify_open_tensor_memory_cache() noexcept;
/// Closes what mpify_open_tensor_memory_cache returned (null: nothing).
extern "C" MPIFY_API void mpify_close_tensor_memory_cache(void* cache) noexcept;
