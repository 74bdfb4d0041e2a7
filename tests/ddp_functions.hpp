#pragma once
// Functions the DDP tests run with in_ddp (compiled into the test-functions library).
// Light on purpose: the tests include it in many files, and <torch/torch.h> (or
// <mpify/torch.hpp>) costs each of them many seconds of compiling; ddp_functions.cpp
// has them.
#include <mpify/ddp_guard.hpp>
#include <mpify/mpify.hpp>
#include <mpify/tensor.hpp>

#include <ATen/core/Tensor.h>
// c10's logging defines a CHECK macro (LibTorch 2.x's own, or glog's), which Catch2's must
// replace: the test files that include this header are compiled in groups, and each
// includes it before Catch2, so it comes before Catch2 in every group.
#include <c10/util/Logging.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ddp_test {

/// The fixed data set: 12 samples of 6 features, one target each.
std::pair<at::Tensor, at::Tensor> equivalence_data();

/// How to train in train_mlp.
struct TrainSpec {
    int steps = 20;
    int micro_batches = 1;     ///< >1: gradient accumulation under no_sync()
    std::int64_t bucket_bytes = 25 << 20;
    std::string hook;  ///< "bf16", "fp16": DdpModelOptions::communication_hook; empty: none
    template <class Archive>
    void serialize(Archive& ar, const unsigned int) {
        ar & steps & micro_batches & bucket_bytes & hook;
    }
};

/// What a DDP training run reports from rank 0.
struct TrainResult {
    std::vector<at::Tensor> parameters;
    std::int64_t buckets = 0;
    std::int64_t sent_during_backward = 0;
    std::int64_t gradient_bytes = 0;  ///< all-reduced for the gradients in the last step (the record's count)
    template <class Archive>
    void serialize(Archive& ar, const unsigned int) {
        ar & parameters & buckets & sent_during_backward & gradient_bytes;
    }
};

/// Plain SGD on the whole batch in this process: the reference.
std::vector<at::Tensor> train_mlp_single(const TrainSpec& spec);

std::int64_t allreduce_rank();
/// mpify::ddp::device() of this rank, as text ("cpu", "cuda:1").
std::string device_of_rank();
/// Throws unless every LibTorch library this rank has mapped lies in `expected_folder`, and
/// (LibTorch 2.x) no Gloo library is mapped beside it; returns how many files are mapped.
int libtorch_files_checked(std::string expected_folder);
/// All-reduces rank + 1000 × restart_count(); rank `dying_rank` kills itself after one
/// all-reduce on each of the first `failed_attempts` attempts.
std::int64_t allreduce_after_restarts(int dying_rank, int failed_attempts);
/// On the first attempt, each rank says "rank R of W waits"; rank 0 then waits in an
/// all-reduce that the others, waiting until they are stopped, never join. On a restart:
/// "world W sum S restart K", S the all-reduced rank + 1.
std::string wait_for_a_lost_machine();

// mpify's shared-memory group (shared_memory_functions.cpp).
/// getBackendName() of the group this rank is in.
std::string group_backend_name();
/// Run by ranch with the environment of in_ddp's rendezvous (not by in_ddp: the guard is
/// made here): rank `refusing` is told the wrong place for the shared memory the caller
/// made, then every rank forms its group and all-reduces a one: "<backend> <sum>". Throws
/// when the caller made no shared memory.
std::string backend_after_a_rank_refused_the_segment(int refusing);
/// Runs every collective the shared-memory group serves, on every type and reduce op
/// it applies to, large (in pieces), transposed and empty tensors, then a call it hands
/// to Gloo and one more after that; every rank's values are known to every rank. Rank 0
/// returns what came out wrong on it (nothing: all right); another rank throws it.
std::vector<std::string> collectives_wrong_on_this_rank();
/// Rank 0 all-reduces 4 elements, the others 8, then all meet at a barrier: what each
/// was told (" | " between the two). A rank other than 0 not told that the ranks called
/// different collectives throws.
std::string mismatched_all_reduce();
/// How many shared-memory group threads ("mpify-shm-group") this rank has at the start,
/// after the helpers' collectives, and after a collective started and waited for later
/// (with one queued behind it), then 1 if every result was right. A rank other than 0
/// throws when the group's thread was not started at that collective alone, or a result
/// was wrong.
std::vector<int> threads_as_collectives_go();
/// In a group, a training loop of all-reduces in which rank `skipping_rank` skips the
/// third and then spins in in_library::spin_in_own_loop until stopped.
int skip_one_all_reduce(int skipping_rank);
/// Rank 0 all-reduces 1 Mi floats; rank 1 all-reduces 2 Mi ("size") or broadcasts the
/// 1 Mi ("operation"), then both meet at a barrier. What rank 0 was told; a rank not told that the ranks made
/// different collective calls throws.
std::string mismatched_call(std::string how);
/// In a group: rank `silent_rank` says "silent" and never takes part in a collective
/// (until it is stopped); the others all-reduce 1 MiB, waiting for it.
int all_reduce_beside_a_silent_rank(int silent_rank);
TrainResult train_mlp(TrainSpec spec);
bool unused_parameters_stay_consistent();
std::string rank0_first_cache(std::string dir);
int fail_mid_training(int failing_rank);
std::int64_t noop_in_group();
/// How many threads of this process are named mpify-store and mpify-watcher, in a group.
std::vector<int> caller_helper_threads();
bool group_is_active();
/// How many ranks of the group allocate CPU tensors through mpify's tensor memory cache
/// (LibTorch's CPU allocator is not its default), summed over the group.
std::int64_t ranks_caching_tensor_memory();
std::string nested_guard();
/// Writes to a pipe whose reader is gone, from this thread and from a thread started
/// here (as Gloo starts its own): true if both fail with EPIPE (and the process lives).
bool broken_pipe_writes_fail_with_epipe();
/// Rank `dying_rank` is SIGKILLed after two all-reduces; the others go on all-reducing
/// 32 MiB, so that their Gloo threads write to the dead rank's sockets.
int die_during_large_allreduces(int dying_rank);
/// Trains (an all-reduce of 1 MiB per step, 20 steps); rank `dying_rank` SIGKILLs itself
/// at step `dying_step`.
int train_until_killed(int dying_rank, int dying_step);
/// "4 of 4 ranks consistent; rank 0: RANK=0 LOCAL_RANK=0 ...": how many ranks find
/// torchrun's variables in agreement with their group, and rank 0's values.
std::string torchrun_variables();
/// All-reduces 1 MiB over and over (5 minutes at most); rank 0 prints "training" after the
/// first: a run for a test to kill a machine in the middle of.
int allreduce_until_stopped();
/// Prints "joining" (not on local rank 0), then joins a group of `world_size` at
/// 127.0.0.1:`port` with a DdpGuard of its own, for a minute at most.
int join_group_of(int world_size, int port);
/// The local addresses (hex, as in /proc/net/tcp) of the TCP sockets this process listens
/// on while its group is up: in the caller, rank 0, that includes whatever in_ddp opened.
std::vector<std::string> listening_addresses();

}  // namespace ddp_test
