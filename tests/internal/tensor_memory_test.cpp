// The cache of CPU tensor memory (memory/tensor_memory_cache.hpp): what it serves from
// kept blocks, what it leaves to LibTorch, and the bound on what it keeps.
#include "memory/tensor_memory_cache.hpp"

#include <mpify/tensor_memory.hpp>

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

using mpify::detail::tensor_memory_figures;

namespace {

constexpr std::int64_t floats_of_4_mib = 1 << 20;

// A "training step": three large temporaries alive at once, then all freed.
void one_step(std::int64_t floats) {
    std::vector<at::Tensor> temporaries;
    for (int i = 0; i < 3; ++i) temporaries.push_back(at::ones({floats}));
    CHECK(temporaries[2].sum().item<float>() == static_cast<float>(floats));
}

}  // namespace

TEST_CASE("while a cache lives, each step reuses the blocks of the step before", "[tensor_memory]") {
    c10::Allocator* before = c10::GetCPUAllocator();
    {
        mpify::TensorMemoryCache cache;
        CHECK(c10::GetCPUAllocator() != before);
        for (int step = 0; step < 5; ++step) one_step(floats_of_4_mib);
        const auto figures = tensor_memory_figures();
        CHECK(figures.mapped == 3);
        CHECK(figures.reused == 12);
        CHECK(figures.in_use == 0);
        CHECK(figures.kept == 3 * 4 * 1024 * 1024);
        CHECK(figures.peak_in_use == figures.kept);
    }
    CHECK(c10::GetCPUAllocator() == before);
    CHECK(tensor_memory_figures().kept == 0);
}

TEST_CASE("small tensors are LibTorch's own allocator's", "[tensor_memory]") {
    mpify::TensorMemoryCache cache;
    const at::Tensor small = at::ones({1000});
    CHECK(tensor_memory_figures().in_use == 0);
    CHECK(small.sum().item<float>() == 1000.0f);
}

TEST_CASE("what the cache keeps stays within twice the tensors' peak; the blocks unused longest go first",
          "[tensor_memory]") {
    mpify::TensorMemoryCache cache;
    one_step(floats_of_4_mib);  // keeps three 4 MiB blocks; the peak is 12 MiB
    const std::size_t peak = tensor_memory_figures().peak_in_use;
    CHECK(peak == 12u * 1024 * 1024);
    for (std::int64_t k = 1; k <= 10; ++k) {  // ten blocks of other sizes, one at a time
        const at::Tensor other_size = at::ones({floats_of_4_mib + 1024 * k});
        const auto figures = tensor_memory_figures();
        CHECK(figures.in_use + figures.kept <= 2 * figures.peak_in_use);
    }
    const auto before = tensor_memory_figures();
    CHECK(before.peak_in_use == peak);
    CHECK(before.mapped == 13);
    one_step(floats_of_4_mib);  // the first three blocks were the oldest: unmapped, so mapped again
    CHECK(tensor_memory_figures().mapped == 16);
    CHECK(tensor_memory_figures().in_use + tensor_memory_figures().kept <= 2 * peak);
}

TEST_CASE("a tensor that outlives the cache is unmapped when it is freed, and nested caches count", "[tensor_memory]") {
    c10::Allocator* before = c10::GetCPUAllocator();
    std::optional<at::Tensor> survivor;
    {
        mpify::TensorMemoryCache outer;
        {
            mpify::TensorMemoryCache inner;
            survivor = at::full({floats_of_4_mib}, 2.0f);
        }
        CHECK(c10::GetCPUAllocator() != before);  // the inner one's end did not uninstall
        one_step(floats_of_4_mib);
    }
    CHECK(c10::GetCPUAllocator() == before);
    CHECK(tensor_memory_figures().in_use == 4u * 1024 * 1024);
    CHECK(tensor_memory_figures().kept == 0);
    CHECK(survivor->sum().item<float>() == 2.0f * floats_of_4_mib);
    survivor.reset();
    CHECK(tensor_memory_figures().in_use == 0);
    CHECK(tensor_memory_figures().kept == 0);
}
