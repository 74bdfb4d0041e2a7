#pragma once
// The C++ half of the kernel: clang's incremental interpreter (the engine of clang-repl
// and xeus-cpp), wrapped so that nothing clang or LLVM leaks into the rest of the kernel.
//
// One engine per kernel process. Cells are compiled and run on the calling thread; a
// cell that throws a C++ exception comes back as an Outcome, a cell that crashes takes
// the process with it (the kernel dies, as any Jupyter kernel does on a crash).
#include <memory>
#include <string>
#include <vector>

namespace mpify_kernel {

/// What running one piece of code came to.
struct Outcome {
    enum class Kind {
        ok,
        compile_error,  ///< clang rejected the code; `diagnostics` says why
        exception,      ///< the code threw; `exception_type` and `message` say what
    };
    Kind kind = Kind::ok;
    std::string diagnostics;     ///< clang's diagnostics (warnings too, when the code ran)
    std::string exception_type;  ///< demangled type of the exception that escaped
    std::string message;         ///< its what(), or a description when it was no std::exception
    std::vector<std::string> causes;  ///< "type: what" of each nested exception, outermost first
};

/// Candidates for completing the identifier that ends at the cursor.
struct Completions {
    std::vector<std::string> names;  ///< full names ("ranch", not "ra")
    std::size_t start = 0;           ///< where the completed identifier starts in the code
};

class CppEngine {
public:
    /// `compiler_flags`: what clang gets on its command line (-std, -I, -D, ...).
    explicit CppEngine(std::vector<std::string> compiler_flags);
    ~CppEngine();
    CppEngine(const CppEngine&) = delete;
    CppEngine& operator=(const CppEngine&) = delete;

    /// Compiles and runs `code`: declarations and statements, as clang-repl accepts them.
    Outcome run(const std::string& code);

    /// Makes `#include` look in `folder` too, for the cells that follow. Throws
    /// std::runtime_error when the folder does not exist.
    void add_include_path(const std::string& folder);

    /// Loads a shared library (its symbols become visible to later cells, its static
    /// initializers run). Throws std::runtime_error with the loader's message.
    void load_library(const std::string& path);

    /// What could complete the identifier before `cursor` in `code`, given every
    /// declaration the cells so far have made.
    Completions complete(const std::string& code, std::size_t cursor);

private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace mpify_kernel
