#pragma once
// See ../README.md. ProcessGroupGloo.hpp holds contexts by shared_ptr and, in an inline
// function mpify never calls, sets their timeout.
#include <chrono>

namespace gloo {

class Context {
public:
    void setTimeout(std::chrono::milliseconds timeout);
};

}  // namespace gloo
