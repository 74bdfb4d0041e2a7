// A caller that starts three workers which hang, relays their "pid N marker k" lines to
// stdout, and then waits forever: resources_test.cpp kills it with SIGKILL and checks
// that the workers die with it.
#include "functions.hpp"

#include <mpify/mpify.hpp>

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    mpify::Options options;
    options.caller_rank = std::nullopt;
    mpify::ranch(options, 3, in_library::hang_on_workers, 7);
}
