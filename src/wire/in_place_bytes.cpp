#include "wire/in_place_bytes.hpp"

#include <mpify/detail/blob.hpp>

#include <cstdint>
#include <utility>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

thread_local ViewSource* reading = nullptr;      // the innermost blob being read
thread_local InPlaceRegion* region = nullptr;    // the memory values may keep

}  // namespace

ReadingBlob::ReadingBlob(ViewSource& source) : outer_(reading) { reading = &source; }

ReadingBlob::~ReadingBlob() { reading = outer_; }

InPlaceRegion::InPlaceRegion(const char* begin, std::size_t size, std::shared_ptr<const void> owner)
    : begin(begin), size(size), owner(std::move(owner)), outer_(region) {
    region = this;
}

InPlaceRegion::~InPlaceRegion() { region = outer_; }

InPlaceBytes take_in_place(std::size_t size, std::size_t alignment) noexcept {
    if (reading == nullptr || region == nullptr || reading->unread() < size) return {};
    const char* at = reading->take(0);  // where the next byte is, without reading it
    const auto address = reinterpret_cast<std::uintptr_t>(at);
    const auto first = reinterpret_cast<std::uintptr_t>(region->begin);
    if (address < first || address - first > region->size || size > region->size - (address - first)) return {};
    if (alignment > 1 && address % alignment != 0) return {};
    return {reading->take(size), region->owner};
}

MPIFY_END_DETAIL_NAMESPACE
