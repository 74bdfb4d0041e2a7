// mpify-worker: the worker host for functions that live in shared libraries (always
// the case when the caller is an interpreter). mpify::init serves the call: it loads the
// library named in the call, whose static initializers register its functions.
#include <mpify/process.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
    // load_source's trial (load_source/startup_trial.hpp): load a library, run its static
    // initializers, and say how that went by the exit status, before the caller loads it.
    if (argc == 3 && std::strcmp(argv[1], "--try-load") == 0) {
        if (::dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL) == nullptr) {
            std::fprintf(stderr, "mpify-worker: cannot load %s: %s\n", argv[2], ::dlerror());
            std::fflush(nullptr);
            ::_exit(2);
        }
        std::fflush(nullptr);
        ::_exit(0);  // no static destructors: only the start-up was on trial
    }
    mpify::init(argc, argv);  // in a worker, never returns
    std::fprintf(stderr, "mpify-worker serves calls for mpify::ranch, which starts it; it does nothing "
                         "when started by hand.\n");
    return 2;
}
