#pragma once
// What a notebook cell asks for, before any of it is compiled: xeus-cling's magics and
// pragmas are read here so that the same notebooks run unchanged in xeus-cling and in
// this kernel.
//
//   %%file NAME            (first line) the rest of the cell is written to NAME
//   #pragma cling add_include_path("dir")
//   #pragma cling add_library_path("dir")
//   #pragma cling load("name")            a shared library: a path, or a name looked up
//                                         in the library path ("libfoo", "foo", "libfoo.so")
// Relative paths are relative to the kernel's working folder (the notebook's folder), as
// in xeus-cling. Pragma lines become empty lines, so clang's line numbers stay the cell's.
#include <optional>
#include <string>
#include <vector>

namespace mpify_kernel {

/// One `#pragma cling ...` line.
struct Directive {
    enum class Kind { add_include_path, add_library_path, load };
    Kind kind;
    std::string argument;  ///< as written in the quotes
    int line;              ///< 1-based, within the cell
};

/// A `%%file` cell.
struct FileCell {
    std::string name;
    std::string content;
};

/// A cell taken apart.
struct Cell {
    std::optional<FileCell> file;      ///< set for a %%file cell (nothing else is)
    std::vector<Directive> directives;  ///< in the order they appear
    std::string code;                  ///< what clang compiles (pragma lines blanked)
};

/// Splits a cell into its magics, pragmas and C++ code. Throws std::invalid_argument on a
/// malformed `#pragma cling` line or a `%%file` without a name.
Cell parse_cell(const std::string& text);

/// Jupyter's is_complete answer for `code`: "complete", "incomplete" (an open bracket,
/// string or comment, or a trailing backslash: the front end continues the cell) or
/// "invalid" (a closing bracket without its opening one).
std::string completeness(const std::string& code);

/// Finds a library for `#pragma cling load(name)`: `name` itself when it is a path, else
/// NAME, NAME.so and libNAME.so in each folder of `search`, in order. Throws
/// std::runtime_error naming the library and every folder searched.
std::string find_library(const std::string& name, const std::vector<std::string>& search);

}  // namespace mpify_kernel
