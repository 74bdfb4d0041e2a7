// The quick start of the README: one function, three processes, one call.
#include <mpify/mpify.hpp>

#include <iostream>
#include <unistd.h>

int add(int a, int b) { return a + b + mpify::local_rank(); }
MPIFY_REGISTER(add);

std::string hello(std::string who) {
    std::cout << "hello " << who << " from pid " << ::getpid() << '\n';
    return "rank " + std::to_string(mpify::local_rank()) + " of " + std::to_string(mpify::local_world_size());
}
MPIFY_REGISTER(hello);

int main(int argc, char** argv) {
    mpify::init(argc, argv);  // a worker serves its call here and exits

    const std::vector<int> sums = mpify::ranch(3, add, 1, 2);  // rank 0 runs in this process
    std::cout << "ranch(3, add, 1, 2) = {" << sums[0] << ", " << sums[1] << ", " << sums[2] << "}\n";

    mpify::Options options;
    options.caller_rank = std::nullopt;  // the caller only waits: 3 new processes
    for (const std::string& line : mpify::ranch(options, 3, hello, std::string("world"))) std::cout << line << '\n';
}
