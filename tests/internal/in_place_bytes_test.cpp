// Tensors read in place (wire/in_place_bytes.hpp): inside a region that may be kept, a
// tensor's elements are used where the blob holds them, aligned, and the tensor keeps
// the region's owner alive; anywhere else a tensor is a copy.
#include "wire/in_place_bytes.hpp"

#include <mpify/detail/blob.hpp>
#include <mpify/tensor.hpp>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

using mpify::detail::from_blob;
using mpify::detail::InPlaceRegion;
using mpify::detail::to_blob;

namespace {

// A blob where a worker finds its shared arguments: at the start of page-aligned memory.
std::shared_ptr<char> page_aligned_copy(const std::string& blob) {
    const std::size_t size = (blob.size() + 4095) / 4096 * 4096;
    std::shared_ptr<char> memory(static_cast<char*>(std::aligned_alloc(4096, size)), std::free);
    REQUIRE(memory != nullptr);
    std::memcpy(memory.get(), blob.data(), blob.size());
    return memory;
}

bool lies_in(const at::Tensor& tensor, const char* begin, std::size_t size) {
    const auto* data = static_cast<const char*>(tensor.data_ptr());
    return data >= begin && data < begin + size;
}

}  // namespace

TEST_CASE("a tensor read in a region that may be kept uses its elements there and keeps the region alive",
          "[wire][tensor]") {
    // A byte first, so that the tensor's elements needed padding to be aligned.
    const at::Tensor sent = at::arange(1000, at::kFloat);
    const std::string blob = to_blob(std::uint8_t{1}, sent, std::int32_t{7});
    std::shared_ptr<char> memory = page_aligned_copy(blob);

    std::uint8_t before = 0;
    at::Tensor received;
    std::int32_t after = 0;
    {
        const InPlaceRegion region(memory.get(), blob.size(), memory);
        from_blob(std::string_view(memory.get(), blob.size()), before, received, after);
    }
    CHECK(before == 1);
    CHECK(after == 7);
    CHECK(at::equal(received, sent));
    CHECK(lies_in(received, memory.get(), blob.size()));
    CHECK(reinterpret_cast<std::uintptr_t>(received.data_ptr()) % mpify::detail::tensor_alignment == 0);

    const std::weak_ptr<char> watch = memory;
    memory.reset();
    CHECK_FALSE(watch.expired());  // the tensor holds it
    received = at::Tensor();
    CHECK(watch.expired());
}

TEST_CASE("a tensor read outside such a region, or from a misaligned copy of its blob, is a copy", "[wire][tensor]") {
    const at::Tensor sent = at::arange(1000, at::kFloat);
    const std::string blob = to_blob(sent);
    at::Tensor received;
    from_blob(blob, received);
    CHECK(at::equal(received, sent));
    CHECK_FALSE(lies_in(received, blob.data(), blob.size()));

    // The same bytes one byte off their alignment, inside a region: copied, not misused.
    std::shared_ptr<char> memory = page_aligned_copy(std::string(1, '\0') + blob);
    {
        const InPlaceRegion region(memory.get(), blob.size() + 1, memory);
        from_blob(std::string_view(memory.get() + 1, blob.size()), received);
    }
    CHECK(at::equal(received, sent));
    CHECK_FALSE(lies_in(received, memory.get(), blob.size() + 1));
}

TEST_CASE("a tensor whose padding no writer makes is refused", "[wire][tensor]") {
    std::string blob = to_blob(at::arange(4, at::kFloat));
    // ... | padding count (1 byte) | that many zero bytes | 16 bytes of elements
    const std::size_t elements_at = blob.size() - 4 * sizeof(float);
    // The longest padding that fits: a shorter one would take padding zeros for the count.
    std::size_t count_at = std::string::npos;
    for (std::size_t padding = mpify::detail::tensor_alignment; padding-- > 0 && count_at == std::string::npos;)
        if (padding < elements_at && static_cast<unsigned char>(blob[elements_at - padding - 1]) == padding &&
            blob.compare(elements_at - padding, padding, std::string(padding, '\0')) == 0)
            count_at = elements_at - padding - 1;
    REQUIRE(count_at != std::string::npos);
    blob[count_at] = static_cast<char>(mpify::detail::tensor_alignment);
    at::Tensor received;
    CHECK_THROWS_WITH(from_blob(blob, received), Catch::Contains("which no writer of tensors does"));
}
