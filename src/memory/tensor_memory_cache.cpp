#include "memory/tensor_memory_cache.hpp"

#include "common/environment_number.hpp"
#include "compat/torch_compat.hpp"

#include <mpify/tensor_memory.hpp>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

constexpr std::size_t page_bytes = 4096;
// Transparent huge pages cover whole aligned 2 MiB extents: blocks this large are mapped
// at that alignment and advised to use them.
constexpr std::size_t huge_page_bytes = 2 * 1024 * 1024;

std::size_t round_up(std::size_t bytes, std::size_t unit) { return (bytes + unit - 1) / unit * unit; }

// Maps `bytes` (whole pages) of fresh memory; nullptr when the kernel refuses. Blocks of
// a huge page or more start on a huge-page boundary: the mapping is made that much
// larger and the ends beyond the aligned block are given back at once.
void* map_block(std::size_t bytes) {
    if (bytes < huge_page_bytes) {
        void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return data == MAP_FAILED ? nullptr : data;
    }
    const std::size_t padded = bytes + huge_page_bytes;
    void* raw = ::mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const auto start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = round_up(start, huge_page_bytes);
    if (aligned > start) ::munmap(raw, aligned - start);
    const std::uintptr_t end = aligned + bytes, padded_end = start + padded;
    if (padded_end > end) ::munmap(reinterpret_cast<void*>(end), padded_end - end);
    void* data = reinterpret_cast<void*>(aligned);
    ::madvise(data, bytes, MADV_HUGEPAGE);  // advice only: a kernel without THP ignores it
    return data;
}

// The cache itself. Never destroyed: tensors may be freed during static destruction.
//
// LibTorch's mkldnn path allocates through raw_allocate/raw_deallocate, which require
// every DataPtr to have the data pointer as its context and raw_deleter() as its
// deleter. So the blocks are found by their data pointer, and small allocations of the
// allocator underneath are wrapped the same way and handed back to it.
class TensorMemoryCache final : public c10::Allocator {
public:
    c10::DataPtr allocate(std::size_t requested) MPIFY_ALLOCATE_CONST override {
        return const_cast<TensorMemoryCache*>(this)->take(requested);
    }

#if MPIFY_ALLOCATOR_HAS_COPY_DATA
    void copy_data(void* dest, const void* src, std::size_t count) const override {
        default_copy_data(dest, src, count);
    }
#endif

    c10::DeleterFnPtr raw_deleter() const override { return &TensorMemoryCache::give_back; }

    void install() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (depth_++ > 0) return;
        c10::Allocator* current = c10::GetCPUAllocator();
        if (current != this) previous_.store(current, std::memory_order_release);
        figures_.peak_in_use = figures_.in_use;
        figures_.reused = figures_.mapped = 0;
        c10::SetCPUAllocator(this);
    }

    void uninstall() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (depth_ == 0 || --depth_ > 0) return;
        c10::SetCPUAllocator(underneath());
        evict_while([] { return true; });
    }

    TensorMemoryFigures figures() {
        std::lock_guard<std::mutex> lock(mutex_);
        return figures_;
    }

    static TensorMemoryCache& instance() {
        static auto* cache = new TensorMemoryCache;
        return *cache;
    }

private:
    // The allocator that was LibTorch's before this one: small allocations go there.
    c10::Allocator* underneath() const {
        c10::Allocator* previous = previous_.load(std::memory_order_acquire);
        return previous != nullptr ? previous : c10::GetDefaultCPUAllocator();
    }

    c10::DataPtr take(std::size_t requested) {
        const c10::Device cpu(c10::DeviceType::CPU);
        if (requested < large_block_bytes) {
            c10::Allocator* small = underneath();
            if (small->raw_deleter() == nullptr) return small->allocate(requested);  // cannot be wrapped
            void* data = small->raw_allocate(requested);
            return c10::DataPtr(data, data, &TensorMemoryCache::give_back, cpu);
        }
        void* data = kept_or_mapped(round_up(requested, page_bytes));
        return c10::DataPtr(data, data, &TensorMemoryCache::give_back, cpu);
    }

    void* kept_or_mapped(std::size_t bytes) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto same_size = kept_.find(bytes);
            if (same_size != kept_.end() && !same_size->second.empty()) {
                void* data = same_size->second.back().data;  // the most recently freed
                same_size->second.pop_back();
                figures_.kept -= bytes;
                note_in_use(data, bytes);
                ++figures_.reused;
                return data;
            }
        }
        void* data = map_block(bytes);
        if (data == nullptr) {  // out of address space or memory: what is kept unused goes first
            {
                std::lock_guard<std::mutex> lock(mutex_);
                evict_while([] { return true; });
            }
            data = map_block(bytes);
            TORCH_CHECK(data != nullptr, "mpify's tensor memory cache: could not map ", bytes,
                        " bytes for a tensor (out of memory)");
        }
        std::lock_guard<std::mutex> lock(mutex_);
        note_in_use(data, bytes);
        ++figures_.mapped;
        // A step's blocks of one size are not always free when a block of another size is
        // wanted, so a step needs somewhat more than its peak in use (less than twice it on
        // a small CNN: benchmarks/README.md); beyond twice the peak, the blocks kept longest
        // unused go.
        evict_while([this] { return figures_.in_use + figures_.kept > 2 * figures_.peak_in_use; });
        return data;
    }

    void note_in_use(void* data, std::size_t bytes) {
        in_use_[data] = bytes;
        figures_.in_use += bytes;
        if (figures_.in_use > figures_.peak_in_use) figures_.peak_in_use = figures_.in_use;
    }

    static void give_back(void* data) { instance().keep_or_release(data); }

    void keep_or_release(void* data) {
        std::size_t bytes = 0;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto block = in_use_.find(data);
            if (block != in_use_.end()) {
                bytes = block->second;
                in_use_.erase(block);
                figures_.in_use -= bytes;
                if (depth_ > 0) {
                    kept_[bytes].push_back(KeptBlock{data, ++frees_});
                    figures_.kept += bytes;
                    return;
                }
            }
        }
        if (bytes > 0) ::munmap(data, bytes);
        else underneath()->raw_deallocate(data);  // a small allocation of the allocator underneath
    }

    // Unmaps kept blocks, the longest unused first, while `should` holds. Under mutex_.
    template <class Predicate>
    void evict_while(Predicate should) {
        while (figures_.kept > 0 && should()) {
            auto oldest = kept_.end();
            for (auto size = kept_.begin(); size != kept_.end(); ++size)
                if (!size->second.empty() &&
                    (oldest == kept_.end() || size->second.front().freed < oldest->second.front().freed))
                    oldest = size;
            ::munmap(oldest->second.front().data, oldest->first);
            oldest->second.pop_front();
            figures_.kept -= oldest->first;
        }
    }

    // A block kept unused, and when it was freed (the count of frees then).
    struct KeptBlock {
        void* data;
        std::uint64_t freed;
    };

    std::mutex mutex_;
    int depth_ = 0;
    // Read without the lock by small allocations: set before this cache is installed.
    std::atomic<c10::Allocator*> previous_{nullptr};
    std::unordered_map<void*, std::size_t> in_use_;    // data -> bytes, of large blocks
    std::map<std::size_t, std::deque<KeptBlock>> kept_;  // by size in bytes, oldest first
    std::uint64_t frees_ = 0;
    TensorMemoryFigures figures_;
};

}  // namespace

void install_tensor_memory_cache() { TensorMemoryCache::instance().install(); }

void uninstall_tensor_memory_cache() { TensorMemoryCache::instance().uninstall(); }

bool tensor_memory_cache_allowed(const char* who) {
    return environment_number(tensor_memory_cache_var, 1, Malformed::reject, who, 0, 1) == 1;
}

TensorMemoryFigures tensor_memory_figures() { return TensorMemoryCache::instance().figures(); }

MPIFY_END_DETAIL_NAMESPACE

MPIFY_BEGIN_NAMESPACE

TensorMemoryCache::TensorMemoryCache() { detail::install_tensor_memory_cache(); }

TensorMemoryCache::~TensorMemoryCache() { detail::uninstall_tensor_memory_cache(); }

MPIFY_END_NAMESPACE

extern "C" void* mpify_open_tensor_memory_cache() noexcept {
    try {
        if (!mpify::detail::tensor_memory_cache_allowed("mpify_open_tensor_memory_cache")) return nullptr;
        return new mpify::TensorMemoryCache();
    } catch (...) {
        return nullptr;
    }
}

extern "C" void mpify_close_tensor_memory_cache(void* cache) noexcept {
    delete static_cast<mpify::TensorMemoryCache*>(cache);
}
