// The test program is also a worker host: mpify::init serves a call when the program was
// started as a worker, before Catch2 sees the command line.
#include "catch_session.hpp"

#include <mpify/mpify.hpp>

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    return run_catch_session(argc, argv);
}
