#pragma once
// What the session declares for a %%mpify cell: made from clang's parse of the cell
// (rank_declarations.hpp), run by the engine (cpp_engine.hpp).
#include <string>
#include <vector>

namespace mpify_kernel {

/// What a %%mpify cell's code declares, for the session: its own functions without their
/// bodies (the compiled library defines them), everything else as written.
struct Declarations {
    std::string code;
    std::vector<std::string> functions;  ///< the functions whose bodies the library holds
};

}  // namespace mpify_kernel
