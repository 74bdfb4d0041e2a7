// Prints the hosts of a Slurm host list, one per line, as mpify expands it (the
// launchers test compares them with `scontrol show hostnames`).
//   mpify_test_hostlist 'gpu[01-04,7],cpu-a[1-2]'
#include "spawn/launchers/slurm_hostlist.hpp"

#include <exception>
#include <iostream>

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    try {
        for (const std::string& host : mpify::detail::expand_hostlist(argv[1])) std::cout << host << "\n";
    } catch (const std::exception& e) {
        std::cerr << e.what() << "\n";
        return 1;
    }
}
