// Catch2's implementation, compiled once: every test program links it (mpify_test_catch)
// and has a main() of its own that calls run_catch_session (main.cpp, catch_main.cpp).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.hpp"

int run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }
