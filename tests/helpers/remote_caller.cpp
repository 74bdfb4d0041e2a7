// The caller of the one-caller-several-machines tests: ranks placed on other machines
// through a command template (Options::placement), results printed by rank.
//   mpify_test_remote_caller MODE TEMPLATE PER_HOST TIMEOUT_MS HOST...
//   TEMPLATE: a command template, or "slurm" (the caller's allocation) or "slurm:JOB"
//             (Placement::slurm; the HOSTs then only count the nodes), or "mpirun OPTIONS"
//             (Placement::mpirun with those launcher options)
//   MODE: report  every rank's pid ("rank k: pid P"), then a call whose workers print
//                 lines (relayed as "[rank k@host] ..."), then "done"
//         hang    every worker prints "pid P marker 1" and waits until stopped; the
//                 caller waits without a rank of its own; SIGINT interrupts it
//         ddp     in_ddp over the caller's rank and the remote ones: "allreduce = S"
//                 (the sum of the ranks), then "parameters match one process: yes|no"
//         allreduce  the first half of ddp only: "allreduce = S"
//         skip    in_ddp over every rank, in which the last rank skips the third all-reduce
//                 and spins: the TIMEOUT_MS error (stacks and the ranks' collective calls)
//         shrink:M   in_ddp with one restart and Options::min_ranks = M, whose first
//                 attempt waits ("rank R of W waits") until a machine is lost; the
//                 restart prints "shrunk: world W sum S restart 1"
//         calls:plain, calls:torch   six calls of a function that does nothing, from a
//                 library without LibTorch or with it: "call C: S s" (ready and over)
//         ship    load_source of $MPIFY_TEST_SOURCE (a file this helper writes), whose
//                 function ranched twice prints "call C rank k: square S from LIBRARY"
//                 (the library file each rank loaded), after "library: PATH"
//         rebuilt the edit-and-run-again loop, from one caller process, without a rank of
//                 its own: a library built at $MPIFY_TEST_LIBRARY (version 1, then
//                 version 2 put in its place), ranched
//                 before and twice after the rebuild; then a load_source of
//                 $MPIFY_TEST_SOURCE, edited and loaded again. Each call prints
//                 "STEP: V V ..." (the version each rank ran)
// MPIFY_TEST_TEMPLATE_IDLE sets Placement::template_idle (0: a launcher per rank).
// Errors go to stdout as "error: ..." (with nested causes), exit status 1.
#include "ddp_functions.hpp"
#include "functions.hpp"
#include "tensor_functions.hpp"

#include <mpify/load_source.hpp>

#include <ATen/ATen.h>

#include <dlfcn.h>
#include <stdio.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

// A function that exists only as a notebook's cell would make it: in a library that
// load_source compiled on the caller's machine. It says which file it was loaded from.
const char* shipped_source = R"(
#include <mpify/mpify.hpp>
#include <dlfcn.h>
#include <string>
// A C name for dlsym; the C++ type for ranch.
extern "C" std::string shipped_square(int x) {
    Dl_info info{};
    ::dladdr(reinterpret_cast<void*>(&shipped_square), &info);
    return "square " + std::to_string(x * x + mpify::local_rank()) + " from " + info.dli_fname;
}
MPIFY_REGISTER(shipped_square);
)";

void ship(const mpify::Options& options, int n) {
    const char* source = std::getenv("MPIFY_TEST_SOURCE");
    if (source == nullptr) throw std::runtime_error("set MPIFY_TEST_SOURCE to the file to write the source in");
    std::ofstream(source) << shipped_source;
    const std::string library = mpify::load_source(source);
    std::cout << "library: " << library << std::endl;
    using Square = std::string (*)(int);
    auto* square =
        reinterpret_cast<Square>(::dlsym(::dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD), "shipped_square"));
    if (square == nullptr) throw std::runtime_error("no shipped_square in " + library);
    for (int call = 1; call <= 2; ++call) {
        const auto results = mpify::ranch(options, n, square, 3);
        for (int rank = 0; rank < n; ++rank)
            std::cout << "call " << call << " rank " << rank << ": " << results[rank] << std::endl;
    }
}

// A cell's function as a notebook edits it: the source names its version.
std::string edited_source(int version) {
    return "#include <mpify/mpify.hpp>\nint edited_version() { return " + std::to_string(version) +
           "; }\nMPIFY_REGISTER(edited_version);\n";
}

std::string getenv_or_throw(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr) throw std::runtime_error(std::string("set ") + name);
    return value;
}

// Puts a copy of `built` at `path` as a linker does: a new file renamed over the old one.
void build_at(const std::string& built, const std::string& path) {
    const std::string fresh = path + ".new";
    std::ifstream from(built, std::ios::binary);
    std::ofstream(fresh, std::ios::binary) << from.rdbuf();
    if (std::rename(fresh.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename " + fresh);
}

using VersionFunction = int (*)();

void print_versions(const std::string& step, const std::vector<int>& versions) {
    std::cout << step << ":";
    for (int version : versions) std::cout << " " << version;
    std::cout << std::endl;
}

void rebuilt(mpify::Options options, int n) {
    options.caller_rank = std::nullopt;  // every rank loads the library from its machine
    const std::string library = getenv_or_throw("MPIFY_TEST_LIBRARY");
    build_at(MPIFY_TEST_VERSION_1, library);
    auto* get = reinterpret_cast<VersionFunction (*)()>(::dlsym(::dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL),
                                                                "mpify_test_which_version"));
    if (get == nullptr) throw std::runtime_error("no mpify_test_which_version in " + library);
    VersionFunction which_version = get();
    print_versions("built", mpify::ranch(options, n, which_version));
    build_at(MPIFY_TEST_VERSION_2, library);
    print_versions("rebuilt", mpify::ranch(options, n, which_version));
    print_versions("rebuilt again", mpify::ranch(options, n, which_version));

    const std::string source = getenv_or_throw("MPIFY_TEST_SOURCE");
    for (int version = 1; version <= 2; ++version) {
        std::ofstream(source) << edited_source(version);
        const std::string cell = mpify::load_source(source);
        auto* edited = reinterpret_cast<VersionFunction>(::dlsym(::dlopen(cell.c_str(), RTLD_NOW | RTLD_NOLOAD),
                                                                 "_Z14edited_versionv"));
        if (edited == nullptr) throw std::runtime_error("no edited_version in " + cell);
        print_versions("cell " + std::to_string(version), mpify::ranch(options, n, edited));
    }
}

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    if (argc < 6) {
        std::cerr
            << "usage: mpify_test_remote_caller report|hang|ddp|allreduce|skip|shrink:M|ship|rebuilt TEMPLATE PER_HOST "
               "TIMEOUT_MS HOST...\n";
        return 2;
    }
    const std::string mode = argv[1];
    const std::vector<std::string> hosts(argv + 5, argv + argc);
    mpify::Options options;
    const std::string launcher = argv[2];
    if (launcher.rfind("slurm", 0) == 0) {
        options.placement = mpify::Placement::slurm(std::atoi(argv[3]), launcher.substr(launcher.find(':') + 1));
        if (launcher == "slurm") options.placement.slurm_job.clear();  // the caller's own allocation
    } else if (launcher.rfind("mpirun", 0) == 0) {
        options.placement = mpify::Placement::mpirun(hosts, std::atoi(argv[3]));
        options.placement.launcher_options = launcher.substr(std::min(launcher.size(), std::string("mpirun ").size()));
    } else {
        options.placement = mpify::Placement::by_command(launcher, hosts, std::atoi(argv[3]));
    }
    // Test clusters whose node names this machine cannot resolve say where to connect back.
    if (const char* address = std::getenv("MPIFY_TEST_CALLER_ADDRESS")) options.placement.caller_address = address;
    // Cases that wrap each rank's agent in the launcher turn the node templates off.
    if (const char* idle = std::getenv("MPIFY_TEST_TEMPLATE_IDLE"))
        options.placement.template_idle = std::chrono::seconds(std::atoi(idle));
    options.timeout = std::chrono::milliseconds(std::atoi(argv[4]));
    const int n = 1 + static_cast<int>(hosts.size()) * options.placement.ranks_per_host;
    try {
        if (mode == "report") {
            const auto reports = mpify::ranch(options, n, in_library::report);
            for (int rank = 0; rank < n; ++rank)
                std::cout << "rank " << rank << ": pid " << reports[rank].pid << std::endl;
            mpify::ranch(options, n, in_library::print_lines, 1);
            std::cout << "\ndone" << std::endl;
        } else if (mode == "ddp" || mode == "allreduce") {
            std::cout << "allreduce = " << mpify::in_ddp(mpify::DdpOptions{}, options, n, ddp_test::allreduce_rank)
                      << std::endl;
            if (mode == "allreduce") return 0;
            ddp_test::TrainSpec spec;
            spec.bucket_bytes = 64;
            const auto ddp = mpify::in_ddp(mpify::DdpOptions{}, options, n, ddp_test::train_mlp, spec).parameters;
            const auto single = ddp_test::train_mlp_single(spec);
            bool match = ddp.size() == single.size();
            for (std::size_t i = 0; match && i < ddp.size(); ++i) match = at::allclose(ddp[i], single[i], 0, 1e-5);
            std::cout << "parameters match one process: " << (match ? "yes" : "no") << std::endl;
        } else if (mode == "skip") {
            mpify::in_ddp(mpify::DdpOptions{}, options, n, ddp_test::skip_one_all_reduce, n - 1);
        } else if (mode.rfind("shrink:", 0) == 0) {
            options.restarts = 1;
            options.min_ranks = std::atoi(mode.c_str() + 7);
            const std::string result =
                mpify::in_ddp(mpify::DdpOptions{}, options, n, ddp_test::wait_for_a_lost_machine);
            std::cout << "shrunk: " << result << std::endl;
        } else if (mode == "calls:plain" || mode == "calls:torch" || mode == "warmed:plain" || mode == "warmed:torch") {
            // Calls of a function that does nothing, from a library without LibTorch or
            // with it: how long each is, ready and over (the first starts the node templates,
            // unless warm_nodes came first: "warmed:", which times it too).
            const bool plain = mode.find("plain") != std::string::npos;
            if (mode.rfind("warmed:", 0) == 0) {
                const auto began = std::chrono::steady_clock::now();
                if (plain) mpify::warm_nodes(options, in_library::noop);
                else mpify::warm_nodes(options, in_library::tensor_memory_cached);
                const std::chrono::duration<double> took = std::chrono::steady_clock::now() - began;
                std::cout << "warm_nodes: " << took.count() << " s" << std::endl;
            }
            for (int call = 1; call <= 6; ++call) {
                const auto began = std::chrono::steady_clock::now();
                if (plain) mpify::ranch(options, n, in_library::noop);
                else mpify::ranch(options, n, in_library::tensor_memory_cached);
                const std::chrono::duration<double> took = std::chrono::steady_clock::now() - began;
                std::cout << "call " << call << ": " << took.count() << " s" << std::endl;
            }
        } else if (mode == "ship") {
            ship(options, n);
        } else if (mode == "rebuilt") {
            rebuilt(options, n - 1);
        } else if (mode == "hang") {
            mpify::stop_on_sigint();  // SIGINT interrupts the call, as a notebook's interrupt does
            options.caller_rank = std::nullopt;
            mpify::ranch(options, n - 1, in_library::hang_on_workers, 1);
        } else {
            std::cerr << "unknown mode " << mode << "\n";
            return 2;
        }
    } catch (const std::exception& e) {
        std::cout << "error: " << e.what() << std::endl;
        return 1;
    }
    return 0;
}
