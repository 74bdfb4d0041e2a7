// Soak: many calls in one process, and what the process holds before and after.
//
//   ./build/bin/mpify_soak_bench [RANCH_CALLS [IN_DDP_CALLS]]     (default 1000 and 200)
//
// Prints open fds, resident memory, threads and children at the start (after one warm-up
// call of each kind, which starts the warm template and loads Gloo) and at the end. A
// leak shows as a number that grows with the calls; flat is the goal. Not a test.
#include <mpify/ddp_guard.hpp>
#include <mpify/mpify.hpp>

#include <dirent.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace mpify_bench {
void noop();
double allreduce_rank();
}  // namespace mpify_bench

using mpify_bench::allreduce_rank;
using mpify_bench::noop;

namespace {

int entries_in(const char* folder) {
    int count = 0;
    if (DIR* dir = ::opendir(folder)) {
        while (const dirent* entry = ::readdir(dir))
            if (entry->d_name[0] != '.') ++count;
        ::closedir(dir);
    }
    return count;
}

long status_field(const std::string& field) {
    std::ifstream status("/proc/self/status");
    for (std::string key; status >> key;) {
        if (key == field) {
            long value = 0;
            status >> value;
            return value;
        }
    }
    return -1;
}

int children() {
    // Children of this process: each thread's list of the children it made (Linux 3.5+;
    // the warm template is made by a thread of mpify's own).
    int count = 0;
    if (DIR* tasks = ::opendir("/proc/self/task")) {
        while (const dirent* task = ::readdir(tasks)) {
            if (task->d_name[0] == '.') continue;
            std::ifstream list(std::string("/proc/self/task/") + task->d_name + "/children");
            for (long pid; list >> pid;) ++count;
        }
        ::closedir(tasks);
    }
    return count;
}

void report(const char* when) {
    std::printf("%-6s open fds %4d   RSS %8ld KiB   threads %3d   children %d\n", when, entries_in("/proc/self/fd"),
                status_field("VmRSS:"), entries_in("/proc/self/task"), children());
}

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const int ranch_calls = argc > 1 ? std::atoi(argv[1]) : 1000;
    const int ddp_calls = argc > 2 ? std::atoi(argv[2]) : 200;
    mpify::ranch(4, noop);
    mpify::in_ddp(2, allreduce_rank);
    report("start");
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < ranch_calls; ++i) mpify::ranch(4, noop);
    for (int i = 0; i < ddp_calls; ++i) mpify::in_ddp(2, allreduce_rank);
    report("end");
    std::printf("%d x ranch(4, noop) and %d x in_ddp(2, allreduce) in %.1f s\n", ranch_calls, ddp_calls,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}
