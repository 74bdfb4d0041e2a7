// The NCCL backend: CUDA tensors over NCCL, one GPU per rank. Compiled where LibTorch was
// built with CUDA and NCCL (its targets define USE_C10D_NCCL); elsewhere it is a backend
// that says it cannot serve.
#include "ddp/backends/collective_backend.hpp"
#include "ddp/rendezvous.hpp"

#include <mpify/error.hpp>

#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

class NcclBackend final : public CollectiveBackend {
public:
    Backend kind() const override { return Backend::nccl; }

    std::string unavailable_because(const DdpSettings&) const override {
#ifdef USE_C10D_NCCL
        if (c10::cuda::device_count() > 0) return "";
        return "the NCCL backend needs a GPU; CUDA finds none on this machine";
#else
        return "the NCCL backend needs a LibTorch built with CUDA and NCCL; this one is not";
#endif
    }

    void prepare(const DdpSettings& s) const override {
#ifdef USE_C10D_NCCL
        const int device = s.gpus.empty() ? s.local_rank : s.gpus.at(static_cast<std::size_t>(s.local_rank));
        c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
#else
        (void)s;
#endif
    }

    std::unique_ptr<FormedGroup> form(const FormingContext& c) const override {
        const DdpSettings& s = c.settings;
        wait_until_joined(c);
#ifdef USE_C10D_NCCL
        auto options = c10d::ProcessGroupNCCL::Options::create();
        options->timeout = s.timeout;
        auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(c.store, s.rank, s.world_size, options);
        auto formed = std::make_unique<FormedGroup>(as_process_group(nccl, c.store, "nccl", /*cuda=*/true));
        // A constructor can return on one rank while a peer is still completing its
        // connections: nobody goes on (and perhaps tears the group down) before all are done.
        wait_for_all(*c.store, s, "connected", "did not finish connecting");
        return formed;
#else
        throw UsageError(fmt::format("mpify::DdpGuard (rank {}): the NCCL backend is not in this build", s.rank));
#endif
    }
};

}  // namespace

const CollectiveBackend& nccl_backend() {
    static const NcclBackend backend;
    return backend;
}

MPIFY_END_DETAIL_NAMESPACE
