// The NCCL backend: CUDA tensors over NCCL, one GPU per rank (ddp/rank_device.hpp), with a
// Gloo group of the same ranks for CPU tensors, as torch's "cuda:nccl,cpu:gloo". Compiled
// where LibTorch was built with CUDA and NCCL (its targets define USE_C10D_NCCL);
// elsewhere it is a backend that says it cannot serve.
//
// First in the automatic choice: its ranks agree in one round of the store whether every
// one of them has a GPU of its own, and when one has not, all of them go on to the next
// backend together (a machine without GPUs in the group, more ranks than GPUs). The ranks
// of one machine without a GPU driver skip it without that round.
#include "ddp/backends/collective_backend.hpp"
#include "ddp/rank_device.hpp"
#include "ddp/rendezvous.hpp"

#include <mpify/error.hpp>

#ifdef USE_C10D_NCCL
#include "ddp/backends/gloo/gloo_group.hpp"

#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

class NcclBackend final : public CollectiveBackend {
public:
    Backend kind() const override { return Backend::nccl; }

    // Asked for by name, each rank checks its own GPU at once (a clear error before any
    // waiting); chosen automatically, the ranks agree in form(), except on one machine
    // without a GPU driver: every rank there sees that alike, so none asks CUDA or waits
    // for the others' answers.
    std::string unavailable_because(const DdpSettings& s) const override {
#ifdef USE_C10D_NCCL
        if (s.backend != Backend::nccl)
            return ranks_of_one_machine(s) && !machine_may_have_gpus() ? "this machine has no GPU driver" : "";
        const DeviceChoice choice = device_for_rank(s, visible_gpus(), /*nccl=*/true);
        return choice.trouble.empty()
                   ? ""
                   : "the NCCL backend cannot serve rank " + std::to_string(s.rank) + ": " + choice.trouble;
#else
        (void)s;
        return "the NCCL backend needs a LibTorch built with CUDA and NCCL; this one is not";
#endif
    }

    std::unique_ptr<FormedGroup> form(FormingContext& c) const override {
        const DdpSettings& s = c.settings;
#ifdef USE_C10D_NCCL
        const DeviceChoice choice = device_for_rank(s, visible_gpus(), /*nccl=*/true);
        const std::vector<std::string> reports =
            gather_reports(*c.store, s, "nccl/device", choice.trouble, "did not join the group");
        c.log.reached("every rank joined and said whether it has a GPU of its own");
        std::string troubles;
        for (std::size_t rank = 0; rank < reports.size(); ++rank)
            if (!reports[rank].empty())
                troubles += fmt::format("{}rank {}: {}", troubles.empty() ? "" : "; ", rank, reports[rank]);
        if (!troubles.empty()) {
            if (s.backend == Backend::nccl)
                throw UsageError(fmt::format("mpify::DdpGuard (rank {}): the NCCL backend cannot serve this group: {}",
                                             s.rank, troubles));
            c.ranks_joined = true;  // every rank reported
            return nullptr;         // and saw the same reports: all go on to the next backend
        }
        c10::cuda::set_device(static_cast<c10::DeviceIndex>(choice.gpu));
        auto options = c10d::ProcessGroupNCCL::Options::create();
        options->timeout = s.timeout;
        auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(c.store, s.rank, s.world_size, options);
        GlooGroup cpu_gloo = form_gloo_group(c.store, s, c.log, "nccl-cpu-gloo");
        auto group = as_process_group(nccl, "nccl", cpu_gloo.backend, c.store);
        auto formed =
            std::make_unique<FormedGroupWithGloo>(std::move(group), std::move(cpu_gloo.waker), c.store, choice.gpu);
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
