// A program that registers a function but forgets mpify::init: ranch must refuse with a
// UsageError before spawning. Prints what happened for usage_test.cpp to check.
#include <mpify/mpify.hpp>

#include <sys/wait.h>

#include <cerrno>
#include <iostream>

int twice(int x) { return 2 * x; }
MPIFY_REGISTER(twice);

int main() {
    try {
        mpify::ranch(2, twice, 21);
        std::cout << "ranch returned\n";
    } catch (const mpify::UsageError& e) {
        std::cout << "UsageError: " << e.what() << '\n';
    }
    const bool no_children = ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
    std::cout << "children: " << (no_children ? "none" : "some") << '\n';
}
