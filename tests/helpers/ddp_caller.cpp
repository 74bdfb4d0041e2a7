// A caller process for the DDP tests: in_ddp(n, allreduce_rank) with the given base
// rank, world size and port (0: a free port), printing rank 0's result.
//   mpify_test_ddp_caller N BASE_RANK WORLD_SIZE PORT
#include "ddp_functions.hpp"

#include <cstdlib>
#include <iostream>

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    if (argc != 5) return 2;
    mpify::DdpOptions options;
    options.base_rank = std::atoi(argv[2]);
    options.world_size = std::atoi(argv[3]);
    options.port = std::atoi(argv[4]);
    options.timeout = std::chrono::seconds(60);
    const auto sum = mpify::in_ddp(options, std::atoi(argv[1]), ddp_test::allreduce_rank);  // before the line begins
    std::cout << "allreduce = " << sum << std::endl;
}
