// Communication hooks that halve the bytes of DistributedDataParallel's all-reduces: each
// bucket travels as a 16-bit float and its sum comes back in the bucket's own dtype.
#include <mpify/ddp.hpp>
#include <mpify/distributed_data_parallel.hpp>

#include <ATen/ATen.h>
#include <ATen/core/jit_type.h>

MPIFY_BEGIN_NAMESPACE
namespace {

CommunicationHook compress_to(at::ScalarType wire_type, const char* site) {
    return [wire_type, site](GradientBucket& bucket) {
        at::Tensor on_the_wire = bucket.buffer.to(wire_type);
        const c10::intrusive_ptr<c10::ivalue::Future> sent = ddp::all_reduce_async(on_the_wire, site);
        at::Tensor buffer = bucket.buffer;
        return sent->then(
            [buffer, on_the_wire](c10::ivalue::Future&) {
                buffer.copy_(on_the_wire);  // the sum, back in the bucket's dtype
                return c10::IValue(buffer);
            },
            c10::TensorType::get());
    };
}

}  // namespace

CommunicationHook bf16_compress_hook() { return compress_to(at::kBFloat16, "mpify::bf16_compress_hook"); }

CommunicationHook fp16_compress_hook() { return compress_to(at::kHalf, "mpify::fp16_compress_hook"); }

MPIFY_END_NAMESPACE
