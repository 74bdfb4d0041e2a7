#pragma once
// The C++ half of the kernel: clang's incremental interpreter (the engine of clang-repl
// and xeus-cpp), wrapped so that nothing clang or LLVM leaks into the rest of the kernel.
//
// One engine per kernel process; cells run on the thread that made it. A cell goes
// through three steps, each of which leaves the session as it was when it fails:
//   1. its leading #include block, parsed in the session (as xeus-cling does), after a
//      pre-check in a forked child unless every header is a system one (`<...>`) that
//      exists;
//   2. the rest, parsed first in a forked child (forked_check.hpp): clang's crashes and
//      its half-cleaned failures stay there, and every name the code uses must resolve;
//   3. parsed again in the session and run, with interrupts and crashes of the cell's
//      own code ending the cell, not the kernel (recovery.hpp).
// A cell whose last statement is an expression without ';' has that value shown.
#include "declarations.hpp"

#include <memory>
#include <string>
#include <vector>

namespace mpify_kernel {

/// What running one cell came to.
struct Outcome {
    enum class Kind {
        ok,
        compile_error,  ///< clang rejected the code (or crashed on it); `diagnostics` says why
        exception,      ///< the code threw; `exception_type` and `message` say what
        interrupted,    ///< the user interrupted it
        crashed,        ///< the code died of a signal; `message` says which and where
    };
    Kind kind = Kind::ok;
    std::string diagnostics;     ///< clang's diagnostics (warnings too, when the code ran)
    std::string exception_type;  ///< demangled type of the exception that escaped
    std::string message;         ///< its what(), or a description
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

    /// How run() places a cell's own definitions.
    enum class Definitions {
        /// In a namespace of the cell's: a name defined again replaces the earlier one, as
        /// in xeus-cling (definition_shadowing.hpp).
        may_replace_earlier,
        /// At global scope, as written: the declarations of what a library defines.
        as_written,
    };

    /// Compiles and runs a cell's code: declarations and statements, as clang-repl
    /// accepts them; shows the value of a trailing expression (see value.hpp).
    Outcome run(const std::string& code, Definitions definitions = Definitions::may_replace_earlier);

    /// Runs code the kernel wrote itself (no pre-check): a known header, a call it makes.
    Outcome run_trusted(const std::string& code);

    /// Checks a %%mpify cell's code (after its leading #include block ran) in a child and
    /// returns what the session must declare. An Outcome other than ok says why not.
    Outcome declarations_of(const std::string& code, Declarations& out);

    /// Makes `#include` look in `folder` too, for the cells that follow. Throws
    /// std::runtime_error when the folder does not exist.
    void add_include_path(const std::string& folder);
    /// The folders add_include_path added, in order.
    const std::vector<std::string>& include_paths() const;

    /// Loads a shared library (its symbols become visible to later cells, its static
    /// initializers run). Throws std::runtime_error with the loader's message.
    void load_library(const std::string& path);

    /// What could complete the identifier before `cursor` in `code`, given every
    /// declaration the cells so far have made.
    Completions complete(const std::string& code, std::size_t cursor);

    /// The declarations of `name` (a possibly qualified name) as the session knows them,
    /// with their documentation comments and where they are declared; empty if unknown.
    std::string describe(const std::string& name);

private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace mpify_kernel
