#include "ddp/rank_device.hpp"

#include <mpify/error.hpp>
#include <mpify/process.hpp>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstdlib>
#include <unistd.h>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// " (CUDA_VISIBLE_DEVICES is '2,3')", or "" when it is not set.
std::string visible_devices_note() {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return visible != nullptr ? fmt::format(" (CUDA_VISIBLE_DEVICES is '{}')", visible) : "";
}

std::string gpus_seen(int visible) {
    return fmt::format("this process sees {} GPU{}{}", visible, visible == 1 ? "" : "s", visible_devices_note());
}

}  // namespace

void check_gpus(const std::vector<int>& gpus, int local_ranks, const char* who) {
    if (gpus.empty()) return;
    for (std::size_t i = 0; i < gpus.size(); ++i)
        if (gpus[i] < 0) throw UsageError(fmt::format("{}: gpus[{}] is {}; GPU numbers start at 0", who, i, gpus[i]));
    if (static_cast<int>(gpus.size()) < local_ranks)
        throw UsageError(fmt::format("{}: gpus names {} GPU{} for the {} ranks of this call on this machine; give "
                                     "one per rank (a GPU may repeat, except with NCCL)",
                                     who, gpus.size(), gpus.size() == 1 ? "" : "s", local_ranks));
}

DeviceChoice device_for_rank(const DdpSettings& s, int visible, bool nccl) {
    DeviceChoice choice;
    const int k = s.local_rank;
    if (s.gpus.empty()) {
        if (!nccl) return choice;  // the CPU
        if (visible == 0) {
            choice.trouble = fmt::format("local rank {} has no GPU: {}", k, gpus_seen(visible));
        } else if (k >= visible) {
            choice.trouble = fmt::format("local rank {} has no GPU of its own: {} for {} ranks on this machine; run "
                                         "at most {} ranks per machine with NCCL, or give DdpOptions::gpus with "
                                         "Backend::gloo to share them",
                                         k, gpus_seen(visible), s.local_world_size, visible);
        } else {
            choice.gpu = k;
        }
        return choice;
    }
    const int gpu = s.gpus.at(static_cast<std::size_t>(k));
    if (gpu >= visible) {
        choice.trouble = fmt::format("local rank {} was given GPU {} (gpus[{}]), but {}{}", k, gpu, k,
                                     gpus_seen(visible), visible > 0 ? fmt::format(", 0 to {}", visible - 1) : "");
        return choice;
    }
    if (nccl) {
        for (int other = 0; other < s.local_world_size; ++other) {
            if (other != k && s.gpus.at(static_cast<std::size_t>(other)) == gpu) {
                choice.trouble = fmt::format("local ranks {} and {} were both given GPU {}; NCCL needs a GPU per "
                                             "rank (Backend::gloo lets ranks share one)",
                                             std::min(k, other), std::max(k, other), gpu);
                return choice;
            }
        }
    }
    choice.gpu = gpu;
    return choice;
}

int worker_gpu_for_received_tensors(int visible, const std::vector<int>& gpus, int local_rank) {
    const auto k = static_cast<std::size_t>(local_rank);
    if (k < gpus.size() && gpus[k] < visible) return gpus[k];
    return local_rank % visible;
}

int gpu_for_received_tensors(int visible) {
    if (mpify::is_worker())
        return worker_gpu_for_received_tensors(visible, gpus_from_environment(), mpify::local_rank());
    // The caller: where its own CUDA work goes.
    return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice().index();
}

bool machine_may_have_gpus() {
    for (const char* sign : {"/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"})
        if (::access(sign, F_OK) == 0) return true;
    return false;
}

int visible_gpus() { return static_cast<int>(torch::cuda::device_count()); }

MPIFY_END_DETAIL_NAMESPACE
