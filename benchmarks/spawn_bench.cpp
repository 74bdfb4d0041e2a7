// Spawn and argument-shipping costs of mpify::ranch with each spawner, against their
// floors, in one run.
//
//   cmake --build build --target mpify_bench && ./build/bin/mpify_bench [repetitions]
//   ./build/bin/mpify_bench --phases [n]     (where in_ddp(n)'s time goes over ranch(n)'s)
//   ./build/bin/mpify_bench --wake [rounds]  (a round trip to a process whose core is busy, idle;
//                                            a forked child's copy-on-write fault)
//   ./build/bin/mpify_bench --group [rounds] (in_ddp(n) against ranch(n) alone; between them
//                                            the group without its collective, the tensor
//                                            summed at one meeting through a shared page (the
//                                            least a group adds) and the tensor alone; n = 2, 4)
//
// Floors: the fork floor is fork + _exit + wait of n-1 children of this process (which
// has LibTorch loaded): no launcher that starts processes can do less. The exec floor
// starts and reaps n-1 copies of a trivial program linked with LibTorch: what any
// exec-based launcher (Python's mpify, torchrun) pays. Shipping is measured net of the
// same call with an empty argument: a std::string is copied into each worker's memory,
// a tensor is used where the worker's mapping of the shared memory holds it.
#include "timing.hpp"

#include <mpify/ddp.hpp>
#include <mpify/ddp_guard.hpp>
#include <mpify/mpify.hpp>
#include <mpify/tensor.hpp>

#include <ATen/ATen.h>

#include <fcntl.h>
#include <linux/futex.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace {

void noop() {}
MPIFY_REGISTER(noop);

std::size_t byte_count(const std::string& blob) { return blob.size(); }
MPIFY_REGISTER(byte_count);

// A tensor arrives where the shared memory holds it (its pages mapped, not read); a
// string is copied into memory of its own.
std::size_t tensor_byte_count(const at::Tensor& tensor) { return tensor.nbytes(); }
MPIFY_REGISTER(tensor_byte_count);

double allreduce_rank() {
    at::Tensor t = at::full({1}, static_cast<double>(mpify::ddp::rank()), at::kDouble);
    mpify::ddp::all_reduce(t);
    return t.item<double>();
}
MPIFY_REGISTER(allreduce_rank);

// allreduce_rank without its group: the tensor it makes and reads, which a fresh rank
// pays for whatever else it does (the floor under in_ddp's function over a no-op).
double tensors_alone() {
    const at::Tensor t = at::full({1}, static_cast<double>(mpify::local_rank()), at::kDouble);
    return t.item<double>();
}
MPIFY_REGISTER(tensors_alone);

// The page where the ranks of meeting_floor meet: how many have arrived (the futex word)
// and each rank's value.
struct MeetingPage {
    std::atomic<std::uint32_t> arrived;
    double values[64];
};
static_assert(sizeof(MeetingPage) <= 4096, "one page");

// allreduce_rank with the least a group of fresh processes can add to its tensor: each
// rank opens and maps the page its caller made (`page_name`), leaves its value there and
// meets the others once (spinning 50 us, as the shared-memory group's barriers do where
// each rank has a core, then sleeping on a futex that the last to arrive wakes), then
// sums every rank's value into its tensor. No store, no connection, no segment of slots.
double meeting_floor(const std::string& page_name) {
    at::Tensor t = at::full({1}, static_cast<double>(mpify::local_rank()), at::kDouble);
    const int fd = ::shm_open(page_name.c_str(), O_RDWR, 0);
    if (fd < 0) throw std::runtime_error("meeting_floor: shm_open " + page_name + ": " + std::strerror(errno));
    void* mapped = ::mmap(nullptr, sizeof(MeetingPage), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (mapped == MAP_FAILED) throw std::runtime_error(std::string("meeting_floor: mmap: ") + std::strerror(errno));
    auto* page = static_cast<MeetingPage*>(mapped);
    const int n = mpify::local_world_size();
    page->values[mpify::local_rank()] = t.data_ptr<double>()[0];
    auto* word = reinterpret_cast<std::uint32_t*>(&page->arrived);
    const std::uint32_t before = page->arrived.fetch_add(1, std::memory_order_acq_rel);
    if (before + 1 == static_cast<std::uint32_t>(n)) {
        (void)::syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
    } else {
        const bool core_each = static_cast<long>(n) <= ::sysconf(_SC_NPROCESSORS_ONLN);
        const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(core_each ? 50 : 0);
        std::uint32_t seen;
        while ((seen = page->arrived.load(std::memory_order_acquire)) != static_cast<std::uint32_t>(n)) {
            if (std::chrono::steady_clock::now() >= spin_until)
                (void)::syscall(SYS_futex, word, FUTEX_WAIT, seen, nullptr, nullptr, 0);
        }
    }
    double sum = 0;
    for (int rank = 0; rank < n; ++rank) sum += page->values[rank];
    t.data_ptr<double>()[0] = sum;
    ::munmap(mapped, sizeof(MeetingPage));
    return t.item<double>();
}
MPIFY_REGISTER(meeting_floor);

// ranch(n, meeting_floor) with the page made before the call and removed after it.
void ranch_meeting_floor(int n) {
    const std::string name = "/mpify-bench-meeting-" + std::to_string(::getpid());
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) throw std::runtime_error("shm_open " + name + ": " + std::strerror(errno));
    struct Unlinked {
        const std::string& name;
        ~Unlinked() { ::shm_unlink(name.c_str()); }
    } removed_at_the_end{name};
    const bool sized = ::ftruncate(fd, sizeof(MeetingPage)) == 0;
    ::close(fd);
    if (!sized) throw std::runtime_error(std::string("ftruncate: ") + std::strerror(errno));
    mpify::ranch(n, meeting_floor, name);
}

using mpify_bench::steady_nanoseconds;

// When a rank entered its function, on the clock every process shares.
std::int64_t entered() { return steady_nanoseconds(); }
MPIFY_REGISTER(entered);

// In a group: every rank's {entered, made its first tensor, first all-reduce ended, second
// ended} by rank, then when rank 0's function returned.
std::vector<std::int64_t> group_phases() {
    const std::int64_t enter = steady_nanoseconds();
    at::Tensor t = at::ones({1});
    const std::int64_t made = steady_nanoseconds();
    mpify::ddp::all_reduce(t);
    const std::int64_t first = steady_nanoseconds();
    mpify::ddp::all_reduce(t);
    const std::int64_t second = steady_nanoseconds();
    at::Tensor all = at::zeros({mpify::ddp::world_size(), 4}, at::kLong);
    const std::int64_t mine[] = {enter, made, first, second};
    for (int i = 0; i < 4; ++i) all[mpify::ddp::rank()][i] = mine[i];
    mpify::ddp::all_reduce(all);
    std::vector<std::int64_t> out(all.data_ptr<std::int64_t>(), all.data_ptr<std::int64_t>() + all.numel());
    out.push_back(steady_nanoseconds());
    return out;
}
MPIFY_REGISTER(group_phases);

// in_ddp(n, group_phases) and ranch(n, entered) in turn, 41 pairs: medians, in ms, of when
// the last rank entered its function, what its first tensor and its first and second
// all-reduce took, and how long the caller took to return after rank 0's function ended.
void print_group_phases(int n) {
    mpify::Options quiet;
    quiet.relay = mpify::Relay::discard;
    mpify::ranch(quiet, n, entered);  // the template's start
    std::vector<double> ranch_entry, ranch_total, ddp_entry, tensor, first, second, ddp_return, ddp_total;
    const auto ms = [](std::int64_t ns) { return static_cast<double>(ns) / 1e6; };
    for (int run = 0; run < 41; ++run) {
        std::int64_t start = steady_nanoseconds();
        const std::vector<std::int64_t> phases = mpify::in_ddp(mpify::DdpOptions{}, quiet, n, group_phases);
        std::int64_t end = steady_nanoseconds();
        const int last = n - 1;
        ddp_entry.push_back(ms(phases[4 * last] - start));
        tensor.push_back(ms(phases[4 * last + 1] - phases[4 * last]));
        first.push_back(ms(phases[4 * last + 2] - phases[4 * last + 1]));
        second.push_back(ms(phases[4 * last + 3] - phases[4 * last + 2]));
        ddp_return.push_back(ms(end - phases.back()));
        ddp_total.push_back(ms(end - start));
        start = steady_nanoseconds();
        const std::vector<std::int64_t> entries = mpify::ranch(quiet, n, entered);
        end = steady_nanoseconds();
        ranch_entry.push_back(ms(entries.back() - start));
        ranch_total.push_back(ms(end - start));
    }
    const auto median = [](std::vector<double> v) { return mpify_bench::summary(v).median; };
    std::printf("in_ddp(%d) and ranch(%d) in turn, 41 pairs, medians in ms (rank %d: the last)\n", n, n, n - 1);
    std::printf("ranch:  rank %d enters its function at %.3f; the call returns at %.3f\n", n - 1, median(ranch_entry),
                median(ranch_total));
    std::printf("in_ddp: rank %d enters its function (the group formed) at %.3f; its first tensor %.3f, first "
                "all-reduce %.3f, second %.3f;\n        the caller returns %.3f after rank 0's function; the call "
                "returns at %.3f (%.2f of ranch)\n",
                n - 1, median(ddp_entry), median(tensor), median(first), median(second), median(ddp_return),
                median(ddp_total), median(ddp_total) / median(ranch_total));
}

using mpify_bench::measure;

// in_ddp(n, allreduce_rank) against ranch(n, noop), `pairs` of them in turn (template
// spawner), for n = 2 and 4, with between them in_ddp(n, tensors_alone) (the group
// without its collective), ranch(n, meeting_floor) and ranch(n, tensors_alone): medians in
// seconds, and each one's ratio to ranch(n, noop).
void print_group_against_spawn(int pairs) {
    std::printf("in_ddp(n, allreduce), in_ddp(n, tensors_alone), ranch(n, meeting_floor), ranch(n, tensors_alone) "
                "and ranch(n, noop) in turn, %d rounds, medians in seconds, and their ratios to ranch(n, noop)\n",
                pairs);
    std::printf("%-3s %9s %9s %9s %9s %9s | %9s %9s %9s %9s\n", "n", "in_ddp", "group", "meeting", "tensors", "ranch",
                "in_ddp", "group", "meeting", "tensors");
    mpify::ranch(2, noop);  // the template's start
    for (int n : {2, 4}) {
        const std::vector<mpify_bench::Timing> t = mpify_bench::measure_each_in_turn(
            pairs,
            {[&] { mpify::in_ddp(n, allreduce_rank); }, [&] { mpify::in_ddp(n, tensors_alone); },
             [&] { ranch_meeting_floor(n); }, [&] { mpify::ranch(n, tensors_alone); }, [&] { mpify::ranch(n, noop); }});
        const double ranch = t[4].median;
        std::printf("%-3d %9.4f %9.4f %9.4f %9.4f %9.4f | %9.2f %9.2f %9.2f %9.2f\n", n, t[0].median, t[1].median,
                    t[2].median, t[3].median, ranch, t[0].median / ranch, t[1].median / ranch, t[2].median / ranch,
                    t[3].median / ranch);
    }
}

// One byte to a forked child over a UNIX socket and its echo back, `rounds` times: right
// after one another, and after this process has kept its core busy for 300 us, so that
// the child's core has gone idle. What a store round trip pays when the store's thread and
// the rank both sleep: medians, in microseconds.
void print_wake_cost(int rounds) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return std::perror("socketpair");
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(pair[0]);  // so that the parent's close ends this loop
        char byte;
        while (::read(pair[1], &byte, 1) == 1 && ::write(pair[1], &byte, 1) == 1) {
        }
        ::_exit(0);
    }
    ::close(pair[1]);
    auto round_trips = [&](std::chrono::microseconds idle) {
        std::vector<double> times;
        for (int i = 0; i < rounds; ++i) {
            const auto busy_until = std::chrono::steady_clock::now() + idle;
            while (std::chrono::steady_clock::now() < busy_until) {
            }
            char byte = 'x';
            mpify_bench::time_once([&] { (void)(::write(pair[0], &byte, 1) == 1 && ::read(pair[0], &byte, 1) == 1); },
                                   times);
        }
        return mpify_bench::summary(times).median * 1e6;
    };
    const double back_to_back = round_trips(std::chrono::microseconds(0));
    const double after_idle = round_trips(std::chrono::microseconds(300));
    ::close(pair[0]);
    ::waitpid(child, nullptr, 0);
    std::printf("a round trip to a forked child over a UNIX socket, medians of %d, us\n", rounds);
    std::printf("back to back %8.1f\nafter 300 us %8.1f\n", back_to_back, after_idle);
}

// The first write to a page a forked child shares with its parent (its copy-on-write
// fault), per page over 512 pages, median of 9 children, in microseconds.
void print_fault_cost() {
    constexpr std::size_t pages = 512, page = 4096;
    std::vector<char> memory(pages * page, 1);  // touched: present in the parent, shared by a fork
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) return std::perror("pipe");
    std::vector<double> per_page;
    for (int child = 0; child < 9; ++child) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            std::vector<double> time;
            mpify_bench::time_once(
                [&] {
                    for (std::size_t i = 0; i < pages; ++i) memory[i * page] = 2;
                },
                time);
            const double each = time[0] / pages * 1e6;
            (void)!::write(pipe_fds[1], &each, sizeof each);
            ::_exit(0);
        }
        double each = 0;
        if (::read(pipe_fds[0], &each, sizeof each) == sizeof each) per_page.push_back(each);
        ::waitpid(pid, nullptr, 0);
    }
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    if (!per_page.empty())
        std::printf("a copy-on-write page fault in a forked child %8.2f us\n", mpify_bench::summary(per_page).median);
}

// Starts `count` copies of `program` at once and waits for all of them.
void exec_and_reap(const std::string& program, int count) {
    std::vector<pid_t> pids;
    char* argv[] = {const_cast<char*>(program.c_str()), nullptr};
    for (int i = 0; i < count; ++i) {
        pid_t pid;
        if (posix_spawn(&pid, program.c_str(), nullptr, nullptr, argv, environ) == 0) pids.push_back(pid);
    }
    for (pid_t pid : pids) waitpid(pid, nullptr, 0);
}

// Forks `count` children of this process that exit at once, and waits for them.
void fork_and_reap(int count) {
    std::vector<pid_t> pids;
    for (int i = 0; i < count; ++i) {
        const pid_t pid = ::fork();
        if (pid == 0) ::_exit(0);
        if (pid > 0) pids.push_back(pid);
    }
    for (pid_t pid : pids) waitpid(pid, nullptr, 0);
}

std::string sibling(const char* argv0, const char* name) {
    std::string self(argv0);
    const auto slash = self.rfind('/');
    return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/" + name;
}

mpify::Options with(mpify::Spawner spawner) {
    mpify::Options options;
    options.spawner = spawner;
    return options;
}

constexpr mpify::Spawner exec = mpify::Spawner::exec;
constexpr mpify::Spawner warm = mpify::Spawner::warm_template;

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    if (std::getenv("MPIFY_SPAWNER") != nullptr) {
        std::fprintf(stderr, "unset MPIFY_SPAWNER: this benchmark compares the spawners itself\n");
        return 2;
    }
    if (argc > 1 && std::string(argv[1]) == "--phases") {
        print_group_phases(argc > 2 ? std::max(2, std::atoi(argv[2])) : 2);
        return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "--group") {
        print_group_against_spawn(argc > 2 ? std::max(1, std::atoi(argv[2])) : 41);
        return 0;
    }
    if (argc > 1 && std::string(argv[1]) == "--wake") {
        print_wake_cost(argc > 2 ? std::max(1, std::atoi(argv[2])) : 1001);
        print_fault_cost();
        return 0;
    }
    const int repetitions = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
    const std::string floor_program = sibling(argv[0], "mpify_bench_trivial_torch_program");
    std::printf("mpify spawn benchmark: medians of %d runs after a warm-up (9 at least for the pairs run in turn; the "
                "caller is rank 0)\n\n",
                repetitions);

    std::printf("%-16s %9s %9s %9s %9s %12s %12s\n", "seconds", "template", "exec", "fork fl.", "exec fl.", "tmpl/fork",
                "exec/tmpl");
    for (int n : {1, 2, 4}) {
        // The template and its floor in turn: both fork this process's size, and the
        // machine's pace drifts from one second to the next.
        const auto [template_timing, fork_timing] = mpify_bench::measure_in_turn(
            std::max(repetitions, 9), [&] { mpify::ranch(with(warm), n, noop); }, [&] { fork_and_reap(n - 1); });
        const double by_template = template_timing.median, fork_floor = fork_timing.median;
        const double exec_floor = measure(repetitions, [&] { exec_and_reap(floor_program, n - 1); }).median;
        const double by_exec = measure(repetitions, [&] { mpify::ranch(with(exec), n, noop); }).median;
        char vs_fork[32] = "-";  // n = 1 starts no process: there is no floor to compare with
        if (n > 1) std::snprintf(vs_fork, sizeof vs_fork, "%.2f", by_template / fork_floor);
        std::printf("ranch(%d, noop)   %9.4f %9.4f %9.4f %9.4f %12s %12.1f\n", n, by_template, by_exec, fork_floor,
                    exec_floor, vs_fork, by_exec / by_template);
    }

    // A group's cost over the spawn: in_ddp and ranch of the same n in turn (template).
    std::printf("\n%-24s %9s %9s %12s %14s\n", "seconds", "template", "exec", "exec/tmpl", "vs ranch(n)");
    for (int n : {2, 4}) {
        mpify::DdpOptions ddp;
        const auto [group, plain] = mpify_bench::measure_in_turn(
            std::max(repetitions, 9), [&] { mpify::in_ddp(ddp, with(warm), n, allreduce_rank); },
            [&] { mpify::ranch(with(warm), n, noop); });
        const double by_exec = measure(repetitions, [&] { mpify::in_ddp(ddp, with(exec), n, allreduce_rank); }).median;
        std::printf("in_ddp(%d, allreduce)    %9.4f %9.4f %12.1f %14.2f\n", n, group.median, by_exec,
                    by_exec / group.median, group.median / plain.median);
    }

    // Three workers each receive the argument; the rate counts every copy delivered.
    // Best of the runs: steadier than the median when the difference is small. Shared
    // memory twice: with the memfd the process keeps between calls (the default), and
    // with a fresh memfd for every call (MPIFY_KEEP_SHARED_ARGUMENTS=0).
    std::printf("\n%-28s %14s %14s %14s %8s\n", "argument to 3 workers", "shared GB/s", "fresh memfd", "channels GB/s",
                "ratio");
    const int shipping_runs = std::max(repetitions, 5);
    mpify::Options shared = with(warm), channels = with(warm);
    shared.caller_rank = channels.caller_rank = std::nullopt;
    channels.shared_memory_threshold = SIZE_MAX;
    const double empty = measure(shipping_runs, [&] { mpify::ranch(shared, 3, byte_count, std::string()); }).best;
    auto print_rates = [&](const char* what, std::size_t mib, auto&& call) {
        auto rate = [&](const mpify::Options& options) {
            const double net = measure(shipping_runs, [&] { call(options); }).best - empty;
            return net > 0 ? 3.0 * static_cast<double>(mib << 20) / 1e9 / net : 0.0;
        };
        const double by_memfd = rate(shared), by_channel = rate(channels);
        ::setenv("MPIFY_KEEP_SHARED_ARGUMENTS", "0", 1);
        const double by_fresh_memfd = rate(shared);
        ::unsetenv("MPIFY_KEEP_SHARED_ARGUMENTS");
        std::printf("%3zu MiB %-20s %14.2f %14.2f %14.2f %8.2f\n", mib, what, by_memfd, by_fresh_memfd, by_channel,
                    by_channel > 0 ? by_memfd / by_channel : 0.0);
    };
    for (std::size_t mib : {64u, 256u}) {
        const std::string blob(mib << 20, 'x');
        print_rates("std::string", mib,
                    [&](const mpify::Options& options) { mpify::ranch(options, 3, byte_count, blob); });
    }
    for (std::size_t mib : {64u, 256u}) {
        const at::Tensor tensor = at::ones({static_cast<std::int64_t>(mib << 18)}, at::kFloat);  // 4-byte elements
        print_rates("at::Tensor", mib,
                    [&](const mpify::Options& options) { mpify::ranch(options, 3, tensor_byte_count, tensor); });
    }
    return 0;
}
