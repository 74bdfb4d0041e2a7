#pragma once
// Everything mpify has for LibTorch: tensors as arguments, DdpGuard / in_ddp, the ddp
// helpers, DistributedDataParallel, DistributedSampler, SyncBatchNorm and GradScaler.
// Brings in LibTorch headers.
#include <mpify/ddp.hpp>
#include <mpify/ddp_guard.hpp>
#include <mpify/distributed_data_parallel.hpp>
#include <mpify/distributed_sampler.hpp>
#include <mpify/grad_scaler.hpp>
#include <mpify/mpify.hpp>
#include <mpify/sync_batch_norm.hpp>
#include <mpify/tensor.hpp>
#include <mpify/tensor_memory.hpp>
