// The test program is also a worker host: mpify::init serves a call when the program was
// started as a worker, before Catch2 sees the command line.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <mpify/mpify.hpp>

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    return Catch::Session().run(argc, argv);
}
