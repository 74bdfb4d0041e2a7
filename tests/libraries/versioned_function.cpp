// Built twice, as version 1 and version 2 of the same library file: a test replaces one
// by the other on disk between two calls and checks that workers run the new one.
#include <mpify/mpify.hpp>

int which_version() { return MPIFY_TEST_VERSION; }
MPIFY_REGISTER(which_version);

extern "C" int (*mpify_test_which_version())() { return &which_version; }
