// A caller that used CUDA before ranching, as a notebook whose cell ran on the GPU: its
// workers must start without CUDA initialized (the warm template never touches it, and a
// CUDA inherited through fork cannot be used) and must still be able to use it.
//
// Where no driver loads, the program runs itself again with a stand-in for it first on the
// library path (cuda_driver_stub.cpp, in MPIFY_TEST_CUDA_DRIVER_STAND_IN): it counts the CUDA runtime's requests, in memory that a
// forked worker inherits, so a worker whose count is not 0 before its function touched
// CUDA came from a process that had initialized it. With NVIDIA's driver, each worker
// computes on the GPU, which a CUDA initialized before the fork would refuse.
//
// Prints a line per rank and per spawner; exits 0 when every worker started clean and
// then used CUDA, 1 otherwise, 77 (ctest's skip) for a LibTorch without CUDA.
#include <mpify/mpify.hpp>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#ifndef MPIFY_TEST_TORCH_HAS_CUDA

int main() {
    std::cout << "skipped: this LibTorch has no CUDA, so nothing can initialize it\n";
    return 77;
}

#else

namespace {

// The stand-in's count of the runtime's requests; -1 with NVIDIA's driver (or none).
long driver_calls() {
    void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (driver == nullptr) return -1;
    auto* count = reinterpret_cast<int (*)()>(::dlsym(driver, "mpify_test_driver_calls"));
    const long calls = count != nullptr ? count() : -1;
    ::dlclose(driver);
    return calls;
}

// Initializes CUDA here; on a GPU, computes on it. Returns the number of devices.
long use_cuda() {
    const long devices = static_cast<long>(torch::cuda::device_count());
    if (devices > 0 && at::ones({4}, at::kCUDA).sum().item<double>() != 4.0) return -1;
    return devices;
}

// Where the dynamic loader finds no libcuda.so.1, runs this program again with the
// stand-in's folder first on the library path (read by the loader at start only).
void find_a_driver(char** argv) {
    if (void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY)) {  // loading it initializes nothing
        ::dlclose(driver);
        return;
    }
    const char* stand_in = std::getenv("MPIFY_TEST_CUDA_DRIVER_STAND_IN");
    if (stand_in == nullptr || std::getenv("MPIFY_TEST_CUDA_DRIVER_TRIED") != nullptr) return;
    const char* path = std::getenv("LD_LIBRARY_PATH");
    const std::string with_stand_in = std::string(stand_in) + (path != nullptr ? std::string(":") + path : "");
    ::setenv("LD_LIBRARY_PATH", with_stand_in.c_str(), 1);
    ::setenv("MPIFY_TEST_CUDA_DRIVER_TRIED", "1", 1);
    ::execv("/proc/self/exe", argv);
    std::perror("execv /proc/self/exe");
}

}  // namespace

// {pid, the stand-in's count at the start, its count after using CUDA, devices found}
std::vector<long> cuda_report() {
    const long at_start = driver_calls();
    const long devices = use_cuda();
    return {static_cast<long>(::getpid()), at_start, driver_calls(), devices};
}
MPIFY_REGISTER(cuda_report);

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    find_a_driver(argv);
    const long devices = use_cuda();
    const long caller_calls = driver_calls();
    const bool stand_in = caller_calls >= 0;
    if (stand_in && caller_calls == 0) {
        std::cout << "using CUDA made no request to the stand-in driver: the check would see nothing\n";
        return 1;
    }
    if (!stand_in && devices < 1) {
        std::cout << "neither a GPU nor the stand-in driver (MPIFY_TEST_CUDA_DRIVER_STAND_IN): the check would "
                     "see nothing\n";
        return 1;
    }
    std::cout << "caller " << ::getpid() << ": CUDA used, " << devices << " device(s), "
              << (stand_in ? "stand-in driver" : "NVIDIA's driver") << '\n';
    bool clean = true;
    for (const auto spawner : {mpify::Spawner::warm_template, mpify::Spawner::exec}) {
        mpify::Options options;
        options.spawner = spawner;
        const auto reports = mpify::ranch(options, 3, cuda_report);
        const char* name = spawner == mpify::Spawner::exec ? "exec" : "template";
        for (std::size_t rank = 1; rank < reports.size(); ++rank) {
            const auto& r = reports[rank];
            const bool ok = r[3] == devices && (stand_in ? r[1] == 0 && r[2] > 0 : r[1] == -1);
            clean = clean && ok;
            std::cout << name << " rank " << rank << " (pid " << r[0] << "): driver requests at start " << r[1]
                      << ", after using CUDA " << r[2] << ", devices " << r[3] << (ok ? "" : "  <- wrong") << '\n';
        }
    }
    return clean ? 0 : 1;
}

#endif
