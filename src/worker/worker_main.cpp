// mpify-worker: the worker host for functions that live in shared libraries (always
// the case when the caller is an interpreter). mpify::init serves the call: it loads the
// library named in the call, whose static initializers register its functions.
#include <mpify/process.hpp>

#include <cstdio>

int main(int argc, char** argv) {
    mpify::init(argc, argv);  // in a worker, never returns
    std::fprintf(stderr,
                 "mpify-worker serves calls for mpify::ranch, which starts it; it does nothing "
                 "when started by hand.\n");
    return 2;
}
