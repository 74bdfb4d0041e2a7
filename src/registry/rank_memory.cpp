#include "registry/rank_memory.hpp"

#include <atomic>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Set once as libmpify_torch loads (a static initializer, any thread), read by each rank.
std::atomic<RankMemoryOpener> installed_opener{nullptr};

}  // namespace

void install_rank_memory(RankMemoryOpener open) noexcept { installed_opener.store(open); }

RankMemoryScope open_rank_memory() {
    const RankMemoryOpener open = installed_opener.load();
    return open ? open() : RankMemoryScope();
}

MPIFY_END_DETAIL_NAMESPACE
