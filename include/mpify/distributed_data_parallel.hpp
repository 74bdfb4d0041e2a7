#pragma once
// DistributedDataParallel for LibTorch's C++ frontend: wrap a module inside a DdpGuard
// and its gradients are averaged over all ranks during backward, bucket by bucket.
//
//   auto model = std::make_shared<Net>();
//   mpify::DistributedDataParallel ddp_model(model);   // parameters from rank 0
//   auto loss = loss_fn(ddp_model(x), y);
//   loss.backward();                                   // gradients averaged on return
//   optimizer.step();
#include <mpify/abi.hpp>
#include <mpify/detail/libtorch_generation.hpp>
#include <mpify/export.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <torch/nn/module.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

MPIFY_BEGIN_NAMESPACE

/// One bucket of gradients, as a communication hook gets it.
struct GradientBucket {
    std::size_t index = 0;  ///< its place in the order buckets are sent (the same on every rank)
    at::Tensor buffer;      ///< this rank's gradients of the bucket's parameters, flat, one dtype
};

/// A communication hook (PyTorch's register_comm_hook): starts the reduction of `bucket`
/// over the active group and returns a future whose value is the bucket's sum over all ranks
/// (a tensor shaped and typed as bucket.buffer, or a list whose first tensor is it; it may
/// be bucket.buffer itself). DistributedDataParallel divides it by the world size. Called on
/// autograd's thread for every bucket of a synchronized step, in the same order on every
/// rank. Start collectives with ddp::all_reduce_async, so that they are recorded, stopped by
/// an interrupt and named in a hang report. bf16_compress_hook and fp16_compress_hook are two.
using CommunicationHook = std::function<c10::intrusive_ptr<c10::ivalue::Future>(GradientBucket& bucket)>;

/// A hook that all-reduces each bucket as bfloat16, half the bytes of float32, and writes the
/// sum back in the bucket's dtype. bfloat16 keeps float32's range with 8 bits of mantissa. The
/// shared-memory group (and NCCL) sum bfloat16; this LibTorch's Gloo does not: over Gloo use
/// fp16_compress_hook.
MPIFY_API CommunicationHook bf16_compress_hook();
/// The same as float16 (11 bits of mantissa, a range to 65504): Gloo sums it too.
MPIFY_API CommunicationHook fp16_compress_hook();

/// Options of DistributedDataParallel.
struct DdpModelOptions {
    /// Gradients are all-reduced in buckets of about this many bytes; a bucket is sent
    /// as soon as all its gradients are ready, while backward goes on.
    std::size_t bucket_bytes = 25u << 20;
    /// Broadcast buffers (BatchNorm statistics, ...) from rank 0 before every forward.
    bool broadcast_buffers = true;
    /// How each bucket is reduced; empty: an all-reduce of the bucket as it is.
    CommunicationHook communication_hook;
};

namespace detail {

/// The compiled engine behind DistributedDataParallel: autograd hooks, buckets, the
/// collectives, on the active DdpGuard's process group. Made by make_gradient_reducer.
class MPIFY_API GradientReducer {
public:
    virtual ~GradientReducer();

    /// Whether backward averages gradients (false inside no_sync()).
    virtual void set_sync(bool sync) = 0;
    virtual bool sync() const = 0;
    /// Number of buckets the parameters were grouped into.
    virtual std::size_t bucket_count() const = 0;
    /// Buckets sent from a gradient hook while backward still ran, and buckets sent when
    /// it had finished, over the reducer's life (what "overlapped" means, measured).
    virtual std::size_t buckets_sent_during_backward() const = 0;
    virtual std::size_t buckets_sent_after_backward() const = 0;
};

/// A reducer for `parameters` (those that require a gradient), in buckets of about
/// `bucket_bytes`, each reduced by `hook` (empty: all-reduced as it is). Throws UsageError
/// when no DdpGuard is active.
MPIFY_API std::unique_ptr<GradientReducer> make_gradient_reducer(std::vector<at::Tensor> parameters,
                                                                 std::size_t bucket_bytes, CommunicationHook hook = {});

/// Overwrites every rank's tensors with rank 0's (one collective per dtype).
MPIFY_API void broadcast_from_rank0(const std::vector<at::Tensor>& tensors);

}  // namespace detail

/// Wraps a module for data-parallel training in the active DdpGuard's group: its
/// parameters and buffers are copied from rank 0 on construction, and every backward
/// through it leaves each parameter's gradient averaged over all ranks. Parameters that
/// get no gradient in a step (on one rank or all) do not hang the group. Every rank must
/// run backward in every synchronized step.
template <class Module>
class DistributedDataParallel {
public:
    /// Copies rank 0's parameters and buffers into `module` on every rank, and hooks its
    /// gradients. A collective: every rank of the group constructs it.
    explicit DistributedDataParallel(std::shared_ptr<Module> module, DdpModelOptions options = {})
        : module_(std::move(module)), options_(options) {
        std::vector<at::Tensor> state = module_->parameters();
        for (const at::Tensor& b : module_->buffers()) state.push_back(b);
        detail::broadcast_from_rank0(state);
        reducer_ =
            detail::make_gradient_reducer(module_->parameters(), options_.bucket_bytes, options_.communication_hook);
    }

    /// Calls the module's forward.
    template <class... Args>
    decltype(auto) operator()(Args&&... args) {
        if (options_.broadcast_buffers) {
            const std::vector<at::Tensor> buffers = module_->buffers();
            if (!buffers.empty()) detail::broadcast_from_rank0(buffers);
        }
        return module_->forward(std::forward<Args>(args)...);
    }

    /// The wrapped module's members (`ddp_model->train()`).
    Module* operator->() const { return module_.get(); }
    /// The wrapped module.
    Module& operator*() const { return *module_; }
    /// The wrapped module.
    const std::shared_ptr<Module>& module() const { return module_; }
    /// The module's parameters, for the optimizer.
    std::vector<at::Tensor> parameters() const { return module_->parameters(); }

    /// The scope no_sync() returns: gradients stay local while it lives.
    class NoSync {
    public:
        /// Stops the all-reduce of `reducer`'s gradients (made by no_sync()).
        explicit NoSync(detail::GradientReducer& reducer) : reducer_(reducer), previous_(reducer.sync()) {
            reducer_.set_sync(false);
        }
        /// Synchronizes again from the next backward on, as before the scope.
        ~NoSync() { reducer_.set_sync(previous_); }
        NoSync(const NoSync&) = delete;
        NoSync& operator=(const NoSync&) = delete;

    private:
        detail::GradientReducer& reducer_;
        bool previous_;
    };
    /// While the returned object lives, backward only accumulates local gradients
    /// (gradient accumulation); the first backward after it averages the accumulated sum.
    [[nodiscard]] NoSync no_sync() { return NoSync(*reducer_); }

    /// The bucketing engine, for inspection (bucket count, overlap counters).
    const detail::GradientReducer& reducer() const { return *reducer_; }

private:
    std::shared_ptr<Module> module_;
    DdpModelOptions options_;
    std::unique_ptr<detail::GradientReducer> reducer_;
};

/// `DistributedDataParallel ddp(model)` takes the module type from the shared_ptr.
template <class Module>
DistributedDataParallel(std::shared_ptr<Module>) -> DistributedDataParallel<Module>;
/// The same, with options.
template <class Module>
DistributedDataParallel(std::shared_ptr<Module>, DdpModelOptions) -> DistributedDataParallel<Module>;

MPIFY_END_NAMESPACE
