// The least a fresh process costs: fork, an immediate _exit and the reap, from a process
// that has loaded LIBRARY (and everything it needs), as a node template that has loaded a
// call's library forks each rank's worker. No mpify code runs: this is the kernel's price
// for copying and tearing down that many mappings, the floor under any worker forked from
// such a template.
//
//   mpify_bench_process_floor [LIBRARY]   prints one line:
//   "fork+exit+reap MS ms (fork MS ms), M mappings"   medians of 101 cycles
//
// remote_ranks_bench.py --calls runs it for the plain and the LibTorch library, with the
// malloc setting node templates start with (GLIBC_TUNABLES=glibc.malloc.hugetlb=1).
#include "timing.hpp"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

int mappings() {
    std::ifstream maps("/proc/self/maps");
    int count = 0;
    for (std::string line; std::getline(maps, line);) ++count;
    return count;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 2) {
        std::fprintf(stderr, "usage: %s [LIBRARY]\n", argv[0]);
        return 2;
    }
    if (argc == 2 && ::dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) == nullptr) {
        std::fprintf(stderr, "cannot load %s: %s\n", argv[1], ::dlerror());
        return 1;
    }
    using clock = std::chrono::steady_clock;
    constexpr int cycles = 101;
    std::vector<double> fork_times, cycle_times;  // seconds
    for (int i = 0; i < cycles; ++i) {
        const auto began = clock::now();
        const pid_t child = ::fork();
        if (child == 0) ::_exit(0);
        if (child < 0) {
            std::perror("fork");
            return 1;
        }
        const auto forked = clock::now();
        int status = 0;
        if (::waitpid(child, &status, 0) != child) {
            std::perror("waitpid");
            return 1;
        }
        const auto reaped = clock::now();
        fork_times.push_back(std::chrono::duration<double>(forked - began).count());
        cycle_times.push_back(std::chrono::duration<double>(reaped - began).count());
    }
    std::printf("fork+exit+reap %.3f ms (fork %.3f ms), %d mappings\n", 1000 * mpify_bench::summary(cycle_times).median,
                1000 * mpify_bench::summary(fork_times).median, mappings());
    return 0;
}
