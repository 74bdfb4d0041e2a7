#pragma once
#include <mpify/mpify.hpp>
#include <mpify/tensor.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace in_library {
at::Tensor echo_tensor(at::Tensor t);
/// `t` with one of LibTorch's lazy flags set, as a result: "conj" (t.conj()), "neg"
/// (t.conj().imag(), a view with the negative bit) or "zero" (an efficient zero tensor
/// of t's shape, which has no storage).
at::Tensor lazy_view(at::Tensor t, std::string flag);
std::vector<at::Tensor> rank_tensors(at::Tensor base);

/// What a worker sees at entry and after computing with an intra-op (OpenMP) pool.
struct WorkerFacts {
    long pid = 0;
    int threads_at_entry = 0;   ///< threads of the process when fn starts
    int threads_after = 0;      ///< threads once LibTorch's OpenMP pool has computed
    bool result_correct = false;
    template <class Archive>
    void serialize(Archive& ar, unsigned) {
        ar & pid & threads_at_entry & threads_after & result_correct;
    }
};
WorkerFacts worker_facts(int pool_size);

/// True if `t` is exactly arange(n) in its own dtype.
bool is_arange(at::Tensor t, std::int64_t n);

/// True if LibTorch's CPU allocator is not its default one here (a TensorMemoryCache lives).
bool tensor_memory_cached();

/// For each process name among this rank's parent's children (itself as "(this rank)"):
/// whether any of them maps LibTorch (libtorch_cpu).
std::map<std::string, bool> libtorch_mapped_among_siblings();

/// Where a rank found its argument, and what it then made of it.
struct ArgumentUse {
    std::string mapping;     ///< the file /proc/self/maps names for t's elements ("" if none)
    std::int64_t sum_after_write = 0;  ///< t's sum after the rank added its rank to it in place
    template <class Archive>
    void serialize(Archive& ar, unsigned) {
        ar & mapping & sum_after_write;
    }
};
/// Looks up where `t`'s elements lie, then adds the rank to them in place.
ArgumentUse use_argument(at::Tensor t);
}  // namespace in_library
