#pragma once
// What differs between the LibTorch generations mpify builds against — Debian's 1.13 and
// 2.x (the PyPI wheel's, or a user's own) — in one place, so that the rest of the code
// reads the same for both. Each difference is named for what it is, not for a version.
//
// Private: the public headers never include it (a program built against one generation
// is refused by a libmpify_torch of the other: see <mpify/detail/libtorch_generation.hpp>).
#include <torch/version.h>

#include <ATen/autocast_mode.h>
#include <c10/core/Allocator.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>

#include <mpify/abi.hpp>

// Whether the LibTorch compiled against is at least version MAJOR.MINOR.
#define MPIFY_TORCH_AT_LEAST(major, minor) \
    (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// 1 when c10d groups are c10d::Backend objects inside a c10d::ProcessGroup (LibTorch 2.0
// on); 0 when a group is itself the c10d::ProcessGroup that does the collectives (1.x).
#if MPIFY_TORCH_AT_LEAST(2, 0)
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define MPIFY_C10D_HAS_BACKENDS 1
#else
#define MPIFY_C10D_HAS_BACKENDS 0
#endif

// Gloo's TCP loop, when its device ends, stops at its next turn (the Gloo Debian's 1.13
// links) or at its first turn that brings no event (the Gloo inside LibTorch 2.x, which
// handles what is still pending first): a loop kept turning by events never stops there.
#if MPIFY_TORCH_AT_LEAST(2, 0)
#define MPIFY_GLOO_LOOP_STOPS_WHEN_QUIET 1
#else
#define MPIFY_GLOO_LOOP_STOPS_WHEN_QUIET 0
#endif

// c10::Allocator::allocate lost its const in 2.3 (and copy_data became pure virtual in
// 2.2): an allocator declares allocate with MPIFY_ALLOCATE_CONST.
#if MPIFY_TORCH_AT_LEAST(2, 3)
#define MPIFY_ALLOCATE_CONST
#else
#define MPIFY_ALLOCATE_CONST const
#endif
#if MPIFY_TORCH_AT_LEAST(2, 2)
#define MPIFY_ALLOCATOR_HAS_COPY_DATA 1
#else
#define MPIFY_ALLOCATOR_HAS_COPY_DATA 0
#endif

// LibTorch's kernels of loss scaling (_amp_foreach_non_finite_check_and_unscale_,
// _amp_update_scale_) run on the CPU from 2.x on; 1.13 has them for CUDA only.
#if MPIFY_TORCH_AT_LEAST(2, 0)
#define MPIFY_AMP_KERNELS_ON_CPU 1
#else
#define MPIFY_AMP_KERNELS_ON_CPU 0
#endif

MPIFY_BEGIN_DETAIL_NAMESPACE

/// The class a collective backend of mpify's derives from, and what a formed Gloo or NCCL
/// group is: c10d::Backend on 2.x, c10d::ProcessGroup on 1.x (their virtual collectives
/// have the same signatures).
#if MPIFY_C10D_HAS_BACKENDS
using C10dBackend = c10d::Backend;
#else
using C10dBackend = c10d::ProcessGroup;
#endif

#if MPIFY_C10D_HAS_BACKENDS
/// A c10d::ProcessGroup whose backend name is its default backend's own ("gloo",
/// "mpify-shared-memory"), as a 1.x group's is, rather than the kind of backend ("custom").
class NamedProcessGroup final : public c10d::ProcessGroup {
public:
    using c10d::ProcessGroup::ProcessGroup;
    const std::string getBackendName() const override { return getDefaultBackend()->getBackendName(); }
};
#endif

/// The c10d::ProcessGroup that users and mpify's helpers call, serving `backend`'s
/// collectives for tensors on the CPU and on CUDA (Gloo copies CUDA tensors through the
/// host; mpify's shared-memory group hands them to its Gloo group). On 1.x the backend is
/// that group already. `backend_type` is c10d's name for the kind of backend ("gloo"; any
/// other name is a custom backend).
inline c10::intrusive_ptr<c10d::ProcessGroup> as_process_group(c10::intrusive_ptr<C10dBackend> backend,
                                                               const c10::intrusive_ptr<c10d::Store>& store,
                                                               const std::string& backend_type) {
#if MPIFY_C10D_HAS_BACKENDS
    c10::intrusive_ptr<c10d::ProcessGroup> group =
        c10::make_intrusive<NamedProcessGroup>(store, backend->getRank(), backend->getSize());
    const auto type = c10d::ProcessGroup::strToBackendType(backend_type);
    group->setDefaultBackend(type);
    group->setBackend(c10::DeviceType::CPU, type, backend);
    group->setBackend(c10::DeviceType::CUDA, type, backend);
    return group;
#else
    (void)store;
    (void)backend_type;
    return backend;
#endif
}

#if MPIFY_C10D_HAS_BACKENDS
/// A c10d::ProcessGroup of two backends, as torch's "cuda:nccl,cpu:gloo": `cuda` (its
/// default, of c10d's kind `cuda_type`) for CUDA tensors, Gloo for the CPU's.
inline c10::intrusive_ptr<c10d::ProcessGroup> as_process_group(c10::intrusive_ptr<C10dBackend> cuda,
                                                               const std::string& cuda_type,
                                                               c10::intrusive_ptr<C10dBackend> cpu_gloo,
                                                               const c10::intrusive_ptr<c10d::Store>& store) {
    c10::intrusive_ptr<c10d::ProcessGroup> group =
        c10::make_intrusive<NamedProcessGroup>(store, cuda->getRank(), cuda->getSize());
    const auto type = c10d::ProcessGroup::strToBackendType(cuda_type);
    group->setDefaultBackend(type);
    group->setBackend(c10::DeviceType::CUDA, type, cuda);
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, cpu_gloo);
    return group;
}
#endif

/// Whether LibTorch's autocast is on for `device` (the CPU or CUDA), its dtype there, and
/// setting both: the CPU- and GPU-named functions of 1.x were replaced by device-type ones
/// (2.4), and print a deprecation warning where they remain.
inline bool autocast_enabled(c10::DeviceType device) {
#if MPIFY_TORCH_AT_LEAST(2, 4)
    return at::autocast::is_autocast_enabled(device);
#else
    return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}
inline at::ScalarType autocast_dtype(c10::DeviceType device) {
#if MPIFY_TORCH_AT_LEAST(2, 4)
    return at::autocast::get_autocast_dtype(device);
#else
    return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                           : at::autocast::get_autocast_cpu_dtype();
#endif
}
inline void set_autocast(c10::DeviceType device, bool enabled, at::ScalarType dtype) {
#if MPIFY_TORCH_AT_LEAST(2, 4)
    at::autocast::set_autocast_enabled(device, enabled);
    at::autocast::set_autocast_dtype(device, dtype);
#else
    if (device == c10::DeviceType::CUDA) {
        at::autocast::set_enabled(enabled);
        at::autocast::set_autocast_gpu_dtype(dtype);
    } else {
        at::autocast::set_cpu_enabled(enabled);
        at::autocast::set_autocast_cpu_dtype(dtype);
    }
#endif
}

// Autocast lowers CPU operations to float16 from 2.x on; 1.13's CPU autocast knows
// bfloat16 only (its float16 CPU kernels are missing for convolutions, among others).
#if MPIFY_TORCH_AT_LEAST(2, 0)
#define MPIFY_CPU_AUTOCAST_HAS_FLOAT16 1
#else
#define MPIFY_CPU_AUTOCAST_HAS_FLOAT16 0
#endif

MPIFY_END_DETAIL_NAMESPACE
