// A program built with this version's headers, calling a function of libmpify.so.
#include <mpify/process.hpp>

#include <cstdio>

int main() {
    std::printf("abi consumer: loaded, restart_count() = %d\n", mpify::restart_count());
    return 0;
}
