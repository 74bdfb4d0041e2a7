// Every rank of a call holds a TensorMemoryCache while it runs its function, once
// LibTorch (and so this library) is in the process: installed into the core's rank
// memory hook as libmpify_torch loads, taken out as it unloads. MPIFY_TENSOR_MEMORY_CACHE=0
// turns it off, as it does DdpGuard's.
#include "memory/tensor_memory_cache.hpp"
#include "registry/rank_memory.hpp"

#include <mpify/tensor_memory.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

RankMemoryScope open_tensor_memory_cache() {
    if (!tensor_memory_cache_allowed("mpify (each rank's tensor memory cache)")) return {};
    return std::make_shared<TensorMemoryCache>();
}

struct Installation {
    Installation() { install_rank_memory(open_tensor_memory_cache); }
    ~Installation() { install_rank_memory(nullptr); }
};
const Installation installation;

}  // namespace
MPIFY_END_DETAIL_NAMESPACE
