#pragma once
// TensorMemoryCache: LibTorch's large CPU tensors reuse the memory of earlier ones while
// it lives, so that a training step does not fault its temporaries in afresh each time.
//
//   double train(Config cfg) {
//       mpify::TensorMemoryCache keep;   // a DdpGuard holds one already
//       for (auto& batch : loader) { ... }
//   }
#include <mpify/export.hpp>

namespace mpify {

/// The RAII scope of mpify's cache of CPU tensor memory. While one lives in the process,
/// LibTorch's CPU allocations of 128 KiB or more are served from blocks that earlier
/// tensors of the same size freed, and new blocks are mapped on transparent huge pages
/// where the kernel allows it. Without it, glibc unmaps such blocks on free and every
/// training step pays the page faults of its temporaries again (a 2× slower step was
/// measured on a small CNN). What the cache holds, in use and kept, stays within twice
/// the most that tensors held in use at once (the blocks kept longest unused go first);
/// smaller allocations go to LibTorch's allocator. Guards nest (only the outermost acts) and may be made on any
/// thread; the outermost's destruction restores LibTorch's allocator and unmaps what was
/// kept unused.
///
/// DdpGuard (and so in_ddp) holds one in every rank, the caller's too, unless
/// DdpOptions::cache_tensor_memory is false or MPIFY_TENSOR_MEMORY_CACHE=0.
class MPIFY_API TensorMemoryCache {
public:
    TensorMemoryCache();
    ~TensorMemoryCache();
    TensorMemoryCache(const TensorMemoryCache&) = delete;
    TensorMemoryCache& operator=(const TensorMemoryCache&) = delete;
};

}  // namespace mpify
