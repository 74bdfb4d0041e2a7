// The tests of mpify's internals start no process: Catch2's own main.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
