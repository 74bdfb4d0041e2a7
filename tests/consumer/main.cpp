#include <mpify/mpify.hpp>
#include <mpify/version.hpp>

#include <iostream>

// The version header comes with mpify, installed or built alongside.
static_assert(MPIFY_VERSION_MAJOR >= 0 && MPIFY_VERSION_MINOR >= 0 && MPIFY_VERSION_PATCH >= 0);

int library_rank();

int plus_rank(int x) { return x + mpify::local_rank(); }
MPIFY_REGISTER(plus_rank);

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const std::vector<int> r = mpify::ranch(2, plus_rank, 42);
    std::cout << "consumer: mpify " << MPIFY_VERSION_STRING << std::endl;
    std::cout << "consumer: ranch(2) = " << r[0] << " " << r[1] << std::endl;
    // A function in a shared library: served by mpify-worker (the installed one, or the
    // one built alongside).
    if (mpify::ranch(2, library_rank) == std::vector<int>{0, 1}) std::cout << "consumer: library host ok\n";
    // consumer BROKEN_SOURCE: the command load_source compiles with, from its CompileError.
    if (argc > 1) {
        try {
            mpify::load_source(argv[1]);
        } catch (const mpify::CompileError& e) {
            std::cout << "consumer: " << e.what() << std::endl;
        }
    }
}
