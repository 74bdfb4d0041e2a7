#pragma once
// at::Tensor as a ranch argument or result. Include this header (it brings in ATen's
// Tensor, ~5 s of compile time) wherever a registered function or a ranch call takes or
// returns tensors.
//
// A tensor travels as dtype, shape and its elements in row-major order: any dtype and
// shape, contiguous or not (a strided view arrives as an equal, contiguous tensor).
// requires_grad is kept; autograd history is not. A CUDA tensor arrives on the CPU:
// move it to your device in the receiving function. Sparse and quantized tensors are
// rejected with an error.
#include <mpify/export.hpp>

#include <ATen/core/Tensor.h>
#include <boost/serialization/binary_object.hpp>
#include <boost/serialization/level.hpp>
#include <boost/serialization/split_free.hpp>
#include <boost/serialization/tracking.hpp>
#include <boost/serialization/vector.hpp>

#include <cstdint>
#include <vector>

namespace mpify {
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

}  // namespace detail
}  // namespace mpify

namespace boost {
namespace serialization {

/// Writes defined-ness, dtype, shape, requires_grad, then the elements in row-major order.
template <class Archive>
void save(Archive& ar, const at::Tensor& tensor, const unsigned int /*version*/) {
    const mpify::detail::TensorToSave saved = mpify::detail::prepare_tensor_for_saving(tensor);
    ar << saved.defined;
    if (!saved.defined) return;
    ar << saved.dtype << saved.sizes << saved.requires_grad;
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
    void* data = nullptr;
    std::size_t nbytes = 0;
    at::Tensor fresh = mpify::detail::empty_tensor_for_loading(dtype, sizes, false, data, nbytes);
    binary_object bytes(data, nbytes);
    ar >> bytes;
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
