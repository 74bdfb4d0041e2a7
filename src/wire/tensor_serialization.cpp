// The compiled half of tensor serialization (include/mpify/tensor.hpp): the ATen calls
// stay here, so the header needs only at::Tensor itself.
#include "ddp/rank_device.hpp"
#include "wire/in_place_bytes.hpp"

#include <mpify/error.hpp>
#include <mpify/tensor.hpp>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cstdlib>
#include <utility>

MPIFY_BEGIN_DETAIL_NAMESPACE

TensorToSave prepare_tensor_for_saving(const at::Tensor& tensor) {
    TensorToSave saved;
    saved.defined = tensor.defined();
    if (!saved.defined) return saved;
    if (tensor.is_sparse() || tensor.is_quantized() || tensor.is_mkldnn())
        throw Error(fmt::format("mpify: cannot send a {} tensor; convert it to a dense one first "
                                "(to_dense() / dequantize())",
                                tensor.layout() == at::kStrided ? "quantized" : "sparse"));
    saved.dtype = static_cast<std::int8_t>(tensor.scalar_type());
    saved.sizes = tensor.sizes().vec();
    saved.requires_grad = tensor.requires_grad();
    saved.cuda = tensor.is_cuda();
    // detach: the bytes are what travels, not the autograd graph. to(kCPU) is a no-op
    // for CPU tensors. LibTorch's lazy flags say what the bytes stand for without being
    // in them: a conjugate or negative view (conj(), the imaginary part of a conjugate)
    // shares its base's bytes, an efficient zero tensor has none; each is made real
    // here. contiguous() copies only views that are not dense already.
    at::Tensor values = tensor.detach().to(at::kCPU);
    if (values._is_zerotensor()) values = at::zeros(values.sizes(), values.options().device(at::kCPU));
    saved.dense = values.resolve_conj().resolve_neg().contiguous();
    saved.data = saved.dense.data_ptr();
    saved.nbytes = saved.dense.nbytes();
    return saved;
}

at::Tensor empty_tensor_for_loading(std::int8_t dtype, const std::vector<std::int64_t>& sizes, bool requires_grad,
                                    void*& data, std::size_t& nbytes) {
    const auto type = static_cast<at::ScalarType>(dtype);
    at::Tensor tensor = at::empty(sizes, at::TensorOptions().dtype(type).device(at::kCPU));
    if (requires_grad) tensor.requires_grad_(true);
    data = tensor.data_ptr();
    nbytes = tensor.nbytes();
    return tensor;
}

at::Tensor placed_as_received(at::Tensor received, bool cuda) {
    if (!cuda) return received;
    const int visible = visible_gpus();
    if (visible == 0) {
        const char* shown = std::getenv("CUDA_VISIBLE_DEVICES");
        throw std::runtime_error(fmt::format(
            "mpify: a CUDA tensor arrived in a process that sees no GPU ({}{}): send tensor.cpu() and move it to a "
            "device in the function, or run this rank on a machine with a GPU",
            at::hasCUDA() ? "CUDA finds none" : "its LibTorch has no CUDA",
            shown != nullptr ? fmt::format(", CUDA_VISIBLE_DEVICES='{}'", shown) : std::string()));
    }
    return received.to(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(gpu_for_received_tensors(visible))));
}

bool tensor_in_place(std::int8_t dtype, const std::vector<std::int64_t>& sizes, at::Tensor& tensor) {
    // A type or shape LibTorch refuses: the copying path says why.
    if (dtype < 0 || dtype >= static_cast<int>(at::ScalarType::NumOptions)) return false;
    const auto type = static_cast<at::ScalarType>(dtype);
    std::size_t nbytes = 0;
    try {
        nbytes = c10::elementSize(type);
    } catch (const c10::Error&) {
        return false;
    }
    for (const std::int64_t size : sizes)
        if (size < 0 || __builtin_mul_overflow(nbytes, static_cast<std::size_t>(size), &nbytes)) return false;
    if (nbytes == 0) return false;
    InPlaceBytes bytes = take_in_place(nbytes, tensor_alignment);
    if (bytes.data == nullptr) return false;
    // The storage holds on to the mapping: the last tensor on it unmaps it.
    tensor = at::from_blob(
        const_cast<char*>(bytes.data), sizes, [owner = std::move(bytes.owner)](void*) {},
        at::TensorOptions().dtype(type).device(at::kCPU));
    return true;
}

MPIFY_END_DETAIL_NAMESPACE
