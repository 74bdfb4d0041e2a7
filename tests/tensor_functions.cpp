// Tensor-taking functions, in the test-functions library only (ATen is slow to compile).
#include "tensor_functions.hpp"

#include "support.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/CPUAllocator.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace in_library {

at::Tensor echo_tensor(at::Tensor t) { return t; }
MPIFY_REGISTER(echo_tensor);

at::Tensor lazy_view(at::Tensor t, std::string flag) {
    if (flag == "conj") return t.conj();
    if (flag == "neg") return at::imag(t.conj());
    return at::_efficientzerotensor(t.sizes(), t.options());
}
MPIFY_REGISTER(lazy_view);

std::vector<at::Tensor> rank_tensors(at::Tensor base) {
    return {base + mpify::local_rank(), at::full({2}, mpify::local_rank())};
}
MPIFY_REGISTER(rank_tensors);

WorkerFacts worker_facts(int pool_size) {
    WorkerFacts facts;
    facts.pid = ::getpid();
    facts.threads_at_entry = mpify_test::thread_count();
    at::set_num_threads(pool_size);
    // Large enough that LibTorch splits it over its OpenMP pool.
    const double total = (at::ones({1 << 22}) * 2).sum().item<double>();
    facts.threads_after = mpify_test::thread_count();
    facts.result_correct = total == 2.0 * (1 << 22);
    return facts;
}
MPIFY_REGISTER(worker_facts);

bool is_arange(at::Tensor t, std::int64_t n) { return t.numel() == n && t.equal(at::arange(n, t.options())); }
MPIFY_REGISTER(is_arange);

bool tensor_memory_cached() { return c10::GetCPUAllocator() != c10::GetDefaultCPUAllocator(); }
MPIFY_REGISTER(tensor_memory_cached);

ArgumentUse use_argument(at::Tensor t) {
    ArgumentUse use;
    // /proc/self/maps: "start-end perms offset dev inode [path]", addresses in hex.
    const auto address = reinterpret_cast<std::uintptr_t>(t.data_ptr());
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
        std::istringstream fields(line);
        std::uintptr_t start = 0, end = 0;
        char dash = 0;
        std::string perms, offset, device, inode;
        fields >> std::hex >> start >> dash >> end >> perms >> offset >> device >> inode;
        if (address < start || address >= end) continue;
        std::getline(fields >> std::ws, use.mapping);
        break;
    }
    t.add_(mpify::local_rank());
    use.sum_after_write = t.sum().item<std::int64_t>();
    return use;
}
MPIFY_REGISTER(use_argument);

std::map<std::string, bool> libtorch_mapped_among_siblings() {
    std::map<std::string, bool> mapped;
    for (const pid_t sibling : mpify_test::children(::getppid())) {
        const std::filesystem::path proc = "/proc/" + std::to_string(sibling);
        std::string name = "(this rank)";
        if (sibling != ::getpid()) std::getline(std::ifstream(proc / "comm"), name);
        std::ifstream maps(proc / "maps");
        bool torch = false;
        for (std::string line; !torch && std::getline(maps, line);)
            torch = line.find("libtorch_cpu") != std::string::npos;
        mapped[name] = mapped[name] || torch;
    }
    return mapped;
}
MPIFY_REGISTER(libtorch_mapped_among_siblings);

}  // namespace in_library
