#pragma once
// Functions the SyncBatchNorm tests run with in_ddp (in the test-functions library, beside
// ddp_functions.cpp); light, as ddp_functions.hpp.
#include <mpify/ddp_guard.hpp>
#include <mpify/mpify.hpp>
#include <mpify/tensor.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ddp_test {

/// One comparison of SyncBatchNorm on the ranks with torch's BatchNorm on the whole batch.
struct SyncNormCase {
    int dims = 2;                            ///< 1, 2 or 3: SyncBatchNorm1d/2d/3d
    std::vector<std::int64_t> batch_sizes;   ///< each rank's batch (one per rank; 0 allowed)
    bool converted = false;  ///< through convert_sync_batchnorm of a nested Sequential, else typed members
    template <class Archive>
    void serialize(Archive& ar, const unsigned int) {
        ar & dims & batch_sizes & converted;
    }
};

/// What came of a case, the same on every rank (differences are the largest over ranks).
struct SyncNormReport {
    double largest_difference = 0;  ///< of outputs, input and weight gradients, statistics, eval outputs
    std::string worst;              ///< which of them differed most ("step 1 output", ...)
    std::int64_t norms = 0;             ///< SyncBatchNorm modules in the model trained
    std::int64_t forward_calls = 0;     ///< collective calls of the first training forward
    std::int64_t backward_calls = 0;    ///< ... and of its backward
    std::int64_t forward_call_bytes = 0;  ///< bytes of one forward call
    std::int64_t eval_calls = 0;        ///< collective calls of an eval-mode forward
    template <class Archive>
    void serialize(Archive& ar, const unsigned int) {
        ar & largest_difference & worst & norms & forward_calls & backward_calls & forward_call_bytes & eval_calls;
    }
};

/// Runs each case in the group (every case's batch_sizes has one entry per rank): two
/// training steps (forward, backward of a fixed weighted sum, an SGD step on the weight
/// gradients summed over ranks) and an eval forward, against one process's BatchNorm.
std::vector<SyncNormReport> compare_sync_batch_norm(std::vector<SyncNormCase> cases);

/// A converted Sequential with a BatchNorm1d between two Linears, trained `steps` SGD steps
/// on 12 fixed samples: wrapped in DistributedDataParallel, each rank on its equal share
/// (`in_group`), or alone on all 12. The parameters and running statistics after.
std::vector<at::Tensor> train_with_sync_batch_norm(int steps, bool in_group);

/// In a group, a SyncBatchNorm1d(3) in training fed what `how` says: "one value" (rank 0
/// one sample, the others none), "channels" (rank 1 an input of 4 channels).
int sync_batch_norm_misfed(std::string how);

/// Outside any group: the largest difference between SyncBatchNorm2d and BatchNorm2d
/// (training outputs, input gradients, running statistics, eval outputs), and the printed
/// modules, " | " between them.
std::string sync_batch_norm_alone();

}  // namespace ddp_test
