// A stand-in for NVIDIA's driver library (libcuda.so.1) on a machine without one. When a
// process first initializes CUDA, the CUDA runtime asks the driver for its entry points
// (cuGetProcAddress_v2); the stand-in has none to give (no device, then) and counts the
// requests in its own memory, which a forked child inherits: mpify_test_driver_calls() in
// a fresh worker tells whether the process it was forked from had initialized CUDA
// (template_without_cuda, helpers/cuda_used_caller.cpp). Loading the driver is not
// initializing CUDA: cuBLASLt maps it as it loads, in every process, and asks nothing.
#include <cstdint>

namespace {
constexpr int cuda_error_not_found = 500;
int driver_calls = 0;
}  // namespace

extern "C" {

__attribute__((visibility("default"))) int mpify_test_driver_calls() { return driver_calls; }

__attribute__((visibility("default"))) int cuGetProcAddress_v2(const char*, void** function, int, std::uint64_t,
                                                               void*) {
    ++driver_calls;
    if (function != nullptr) *function = nullptr;
    return cuda_error_not_found;
}

__attribute__((visibility("default"))) int cuDriverGetVersion(int* version) {
    ++driver_calls;
    if (version != nullptr) *version = 13000;
    return 0;
}

}  // extern "C"
