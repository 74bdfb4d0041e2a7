#pragma once
// An open process group as one object: the c10d group and its store, and what opening it
// changed in the process (the environment, SIGPIPE). open_group (open_group.hpp) makes it;
// the active group (active_group.hpp) holds it, and active_group.cpp defines how it closes.
#include "ddp/backends/collective_backend.hpp"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>

#include <mpify/abi.hpp>

MPIFY_BEGIN_NAMESPACE
class TensorMemoryCache;
MPIFY_END_NAMESPACE

MPIFY_BEGIN_DETAIL_NAMESPACE

class ScopedEnvironment;
class SigpipeBlock;
namespace store {
class Server;
}

/// An open group: the c10d objects, and the environment as it was before.
struct ProcessGroupState {
    std::unique_ptr<SigpipeBlock> sigpipe;  ///< first made, last gone: Gloo's threads inherit it
    /// The group's ranks train here: their tensors' memory is kept for the next step
    /// (null: DdpOptions::cache_tensor_memory off). Also when the group is abandoned.
    std::unique_ptr<TensorMemoryCache> tensor_memory;
    int rank = 0;
    int world_size = 1;
    std::unique_ptr<ScopedEnvironment> environment;  ///< RANK, WORLD_SIZE, MASTER_* while open
    std::unique_ptr<store::Server> store_server;     ///< rank 0 of a group launched without in_ddp
    c10::intrusive_ptr<c10d::Store> store;
    /// The group, as its backend formed it (backends/collective_backend.hpp).
    std::unique_ptr<FormedGroup> formed;
    /// Where this rank computes (rank_device.hpp): a GPU it was bound to, or the CPU.
    c10::Device device{c10::DeviceType::CPU};
    /// A wait in it was abandoned (an interrupt): the group is given up on
    /// (FormedGroup::abandon) before it is closed.
    bool abandoned = false;

    /// The c10d group the ranks call.
    const c10::intrusive_ptr<c10d::ProcessGroup>& group() const { return formed->group(); }
    ~ProcessGroupState();  ///< the group, the store, the environment as it was, SIGPIPE as it was
};

MPIFY_END_DETAIL_NAMESPACE
