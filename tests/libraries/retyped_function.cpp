// Built twice with one function of the same name and different types (version 1:
// double, version 2: long), as a library rebuilt after its function changed: a caller
// that knows one and workers that load the other must not exchange bytes silently.
#include <mpify/mpify.hpp>

#if MPIFY_TEST_VERSION == 1
double retyped() { return 1.5; }
#else
long retyped() { return 7; }
#endif
MPIFY_REGISTER(retyped);

extern "C" void* mpify_test_retyped() { return reinterpret_cast<void*>(&retyped); }
