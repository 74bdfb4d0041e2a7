#pragma once
// Which device each rank of a group computes on: a rule of the group's settings and of the
// number of GPUs the process sees, kept apart from CUDA so that it is tested without one.
//
// - NCCL: local rank k uses DdpOptions::gpus[k], or GPU k when gpus is empty; each rank
//   needs a GPU of its own (NCCL refuses two ranks of a group on one).
// - Gloo and the shared-memory group: the CPU, unless gpus is given: then local rank k
//   uses gpus[k], and ranks may share one (Gloo copies CUDA tensors through the host).
// GPU numbers count among the GPUs the process sees: CUDA_VISIBLE_DEVICES applies first,
// as torchrun's and fastai's launchers have it.
#include "ddp/ddp_settings.hpp"

#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// A rank's device: GPU `gpu`, or the CPU (-1); when the rule gives it none, `trouble`
/// says why as a sentence without its full stop, naming the local rank and what to do.
struct DeviceChoice {
    int gpu = -1;
    std::string trouble;
};

/// The device of local rank s.local_rank with NCCL (`nccl`) or another backend, among
/// `visible` GPUs.
DeviceChoice device_for_rank(const DdpSettings& s, int visible, bool nccl);

/// What DdpOptions::gpus must be whatever the machine: entries of 0 or more, and one for
/// each of the `local_ranks` ranks of the call on this machine. Throws UsageError
/// otherwise, naming `who` (the API).
void check_gpus(const std::vector<int>& gpus, int local_ranks, const char* who);

/// The GPU a CUDA tensor arriving in a worker of local rank `local_rank` goes to, among
/// `visible` (> 0): gpus[local_rank] when in_ddp was given `gpus`, else local_rank mod
/// `visible` (its group's device under NCCL).
int worker_gpu_for_received_tensors(int visible, const std::vector<int>& gpus, int local_rank);

/// The GPU a CUDA tensor arriving in this process goes to, among `visible` (> 0): a
/// worker's as above (from its environment), the caller's current CUDA device.
int gpu_for_received_tensors(int visible);

/// Whether this machine has a driver through which CUDA could reach a GPU (NVIDIA's, or
/// WSL's GPU device), looked for in /proc and /dev without CUDA. False: no process here
/// sees a GPU, and asking CUDA would only load its runtime to hear so.
bool machine_may_have_gpus();

/// How many GPUs CUDA shows this process (0 for a LibTorch without CUDA). Initializes
/// CUDA in the calling process: ranks only, never a template.
int visible_gpus();

MPIFY_END_DETAIL_NAMESPACE
