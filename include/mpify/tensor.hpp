#pragma once
// at::Tensor as a ranch argument or result. Include this header (it brings in ATen's
// Tensor, seconds of compile time) wherever a registered function or a ranch call takes or
// returns tensors.
//
// A tensor travels as dtype, shape and its elements in row-major order, through the host:
// any dtype and shape, contiguous or not (a strided view arrives as an equal, contiguous
// tensor). requires_grad is kept; autograd history is not. A CUDA tensor arrives on CUDA,
// on the receiving process's GPU: a worker's is DdpOptions::gpus[local rank] when in_ddp
// was given gpus, else GPU (local rank mod the GPUs it sees), which is its group's device
// under NCCL; the caller's is its current CUDA device. A process that sees no GPU refuses
// one with an error (send tensor.cpu() instead). Tensors of other devices arrive on the
// CPU. Sparse and quantized tensors are rejected with an error.
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
    bool cuda = false;  ///< it was a CUDA tensor: it arrives on CUDA
    at::Tensor dense;   ///< keeps the bytes alive while they are written
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

/// `received` (a CPU tensor just read) where a tensor sent from `cuda` memory or not
/// arrives in this process (the rule at the top of this header); throws
/// std::runtime_error for a CUDA tensor in a process that sees no GPU.
MPIFY_API at::Tensor placed_as_received(at::Tensor received, bool cuda);

/// Elements start at a multiple of this in a blob, so that they can be used in place.
constexpr std::size_t tensor_alignment = 64;
/// Zero bytes that move a tensor's elements to the next multiple of tensor_alignment.
inline constexpr char tensor_padding_bytes[tensor_alignment] = {};

}  // namespace detail
MPIFY_END_NAMESPACE

namespace boost {
namespace serialization {

/// Writes defined-ness, dtype, shape, requires_grad, whether it is a CUDA tensor, the count
/// of padding bytes and those bytes (0 to 63: the elements start at a multiple of 64 in the
/// blob), then the elements in row-major order.
template <class Archive>
void save(Archive& ar, const at::Tensor& tensor, const unsigned int /*version*/) {
    using mpify::detail::tensor_alignment;
    const mpify::detail::TensorToSave saved = mpify::detail::prepare_tensor_for_saving(tensor);
    ar << saved.defined;
    if (!saved.defined) return;
    ar << saved.dtype << saved.sizes << saved.requires_grad << saved.cuda;
    const std::size_t elements_at = mpify::detail::blob_write_offset() + 1;  // after the count
    const auto padding =
        static_cast<std::uint8_t>((tensor_alignment - elements_at % tensor_alignment) % tensor_alignment);
    ar << padding;
    if (padding > 0) ar << make_binary_object(mpify::detail::tensor_padding_bytes, padding);
    ar << make_binary_object(saved.data, saved.nbytes);
}

/// Reads what save wrote into a fresh tensor: on the CPU, or on this process's GPU for a
/// CUDA tensor.
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
    bool requires_grad = false, cuda = false;
    ar >> dtype >> sizes >> requires_grad >> cuda;
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
    if (cuda) fresh = mpify::detail::placed_as_received(std::move(fresh), cuda);
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
