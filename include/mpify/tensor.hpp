#pragma once
// at::Tensor as a ranch argument or result. Include this header (it brings in ATen's
// Tensor, seconds of compile time) wherever a registered function or a ranch call takes or
// returns tensors.
//
// A tensor travels as dtype, shape and its elements in row-major order: any dtype and
// shape, contiguous or not (a strided view arrives as an equal, contiguous tensor).
// requires_grad is kept; autograd history is not. A CUDA tensor arrives on the CPU:
// move it to your device in the receiving function. Sparse and quantized tensors are
// rejected with an error.
//
// A worker's tensor arguments that came through shared memory (the call's arguments over
// Options::shared_memory_threshold) are not copied: the tensor uses its elements where
// the worker's copy-on-write mapping of them lies, and a rank that writes into it gets
// its own copies of the pages it writes. Such a tensor cannot grow (resize_ beyond its
// size fails): clone() it first.
#include <mpify/abi.hpp>
#include <mpify/detail/blob.hpp>
#include <mpify/detail/libtorch_generation.hpp>
#include <mpify/export.hpp>

#include <ATen/core/Tensor.h>
#include <boost/serialization/binary_object.hpp>
#include <boost/serialization/level.hpp>
#include <boost/serialization/split_free.hpp>
#include <boost/serialization/tracking.hpp>
#include <boost/serialization/vector.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

MPIFY_BEGIN_NAMESPACE
namespace detail {

/// A tensor as it is about to be saved: a dense CPU copy (or the tensor itself when it is
/// one already) and what it takes to rebuild it.
struct TensorToSave {
    bool defined = false;
    std::int8_t dtype = 0;
    std::vector<std::int64_t> sizes;
    bool requires_grad = false;
    at::Tensor dense;  ///< keeps the bytes alive while they are written
    const void* data = nullptr;
    std::size_t nbytes = 0;
};

/// The tensor as it will be written; throws mpify::Error for sparse or quantized tensors.
MPIFY_API TensorToSave prepare_tensor_for_saving(const at::Tensor& tensor);
/// An uninitialized CPU tensor to read `nbytes` of elements into.
MPIFY_API at::Tensor empty_tensor_for_loading(std::int8_t dtype, const std::vector<std::int64_t>& sizes,
                                              bool requires_grad, void*& data, std::size_t& nbytes);
/// A tensor on the elements where they lie in the blob being read, when that memory may
/// be kept (a worker's shared arguments: src/wire/in_place_bytes.hpp); they are then read.
/// Otherwise false, and nothing is read.
MPIFY_API bool tensor_in_place(std::int8_t dtype, const std::vector<std::int64_t>& sizes, at::Tensor& tensor);

/// Elements start at a multiple of this in a blob, so that they can be used in place.
constexpr std::size_t tensor_alignment = 64;
/// Zero bytes that move a tensor's elements to the next multiple of tensor_alignment.
inline constexpr char tensor_padding_bytes[tensor_alignment] = {};

}  // namespace detail
MPIFY_END_NAMESPACE

namespace boost {
namespace serialization {

/// Writes defined-ness, dtype, shape, requires_grad, the count of padding bytes and
/// those bytes (0 to 63: the elements start at a multiple of 64 in the blob), then the
/// elements in row-major order.
template <class Archive>
void save(Archive& ar, const at::Tensor& tensor, const unsigned int /*version*/) {
    using mpify::detail::tensor_alignment;
    const mpify::detail::TensorToSave saved = mpify::detail::prepare_tensor_for_saving(tensor);
    ar << saved.defined;
    if (!saved.defined) return;
    ar << saved.dtype << saved.sizes << saved.requires_grad;
    const std::size_t elements_at = mpify::detail::blob_write_offset() + 1;  // after the count
    const auto padding =
        static_cast<std::uint8_t>((tensor_alignment - elements_at % tensor_alignment) % tensor_alignment);
    ar << padding;
    if (padding > 0) ar << make_binary_object(mpify::detail::tensor_padding_bytes, padding);
    ar << make_binary_object(saved.data, saved.nbytes);
}

/// Reads what save wrote into a fresh CPU tensor.
template <class Archive>
void load(Archive& ar, at::Tensor& tensor, const unsigned int /*version*/) {
    bool defined = false;
    ar >> defined;
    if (!defined) {
        tensor = at::Tensor();
        return;
    }
    std::int8_t dtype = 0;
    std::vector<std::int64_t> sizes;
    bool requires_grad = false;
    ar >> dtype >> sizes >> requires_grad;
    std::uint8_t padding = 0;
    ar >> padding;
    if (padding >= mpify::detail::tensor_alignment)
        throw std::runtime_error("a tensor's elements are said to start " + std::to_string(padding) +
                                 " bytes on, which no writer of tensors does");
    char skipped[mpify::detail::tensor_alignment];
    if (padding > 0) {
        binary_object skip(skipped, padding);
        ar >> skip;
    }
    at::Tensor fresh;
    if (!mpify::detail::tensor_in_place(dtype, sizes, fresh)) {
        void* data = nullptr;
        std::size_t nbytes = 0;
        fresh = mpify::detail::empty_tensor_for_loading(dtype, sizes, false, data, nbytes);
        binary_object bytes(data, nbytes);
        ar >> bytes;
    }
    if (requires_grad) fresh.requires_grad_(true);
    tensor = std::move(fresh);
}

/// Boost's entry point: dispatches to save or load.
template <class Archive>
void serialize(Archive& ar, at::Tensor& tensor, const unsigned int version) {
    split_free(ar, tensor, version);
}

}  // namespace serialization
}  // namespace boost

// A tensor is a value here: no class information, no object tracking.
BOOST_CLASS_IMPLEMENTATION(at::Tensor, boost::serialization::object_serializable)
BOOST_CLASS_TRACKING(at::Tensor, boost::serialization::track_never)
