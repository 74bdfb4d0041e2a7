// The caller of the one-caller-several-machines tests: ranks placed on other machines
// through a command template (Options::placement), results printed by rank.
//   mpify_test_remote_caller MODE TEMPLATE PER_HOST TIMEOUT_MS HOST...
//   MODE: report  every rank's pid ("rank k: pid P"), then a call whose workers print
//                 lines (relayed as "[rank k@host] ..."), then "done"
//         hang    every worker prints "pid P marker 1" and waits until stopped; the
//                 caller waits without a rank of its own
// Errors go to stdout as "error: ..." (with nested causes), exit status 1.
#include "functions.hpp"

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    if (argc < 6) {
        std::cerr << "usage: mpify_test_remote_caller report|hang TEMPLATE PER_HOST TIMEOUT_MS HOST...\n";
        return 2;
    }
    const std::string mode = argv[1];
    const std::vector<std::string> hosts(argv + 5, argv + argc);
    mpify::Options options;
    options.placement = mpify::Placement::by_command(argv[2], hosts, std::atoi(argv[3]));
    options.timeout = std::chrono::milliseconds(std::atoi(argv[4]));
    const int n = 1 + static_cast<int>(hosts.size()) * options.placement.ranks_per_host;
    try {
        if (mode == "report") {
            const auto reports = mpify::ranch(options, n, in_library::report);
            for (int rank = 0; rank < n; ++rank)
                std::cout << "rank " << rank << ": pid " << reports[rank].pid << std::endl;
            mpify::ranch(options, n, in_library::print_lines, 1);
            std::cout << "\ndone" << std::endl;
        } else if (mode == "hang") {
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
