#pragma once
// What a notebook cell asks for, before any of it is compiled: xeus-cling's magics and
// pragmas are read here so that the same notebooks run unchanged in xeus-cling and in
// this kernel.
//
//   %%file NAME            (first line) the rest of the cell is written to NAME
//   %%mpify [FLAG...]      (first line) the rest is compiled into a library the ranks run
//                          (mpify::load_source), and declared for the cells that follow;
//                          FLAGs go to the compiler (-O3, -DNAME, -lfoo, /path/libbar.so)
//   %%timeit [-n N] [-r R] (first line) the rest is timed, as in IPython
//   %timeit [-n N] [-r R] STATEMENT      (a line) times the statement
//   !COMMAND               (a line at top level) runs COMMAND with /bin/sh, output to the cell
//   ?NAME, NAME?, ??NAME   (the whole cell) what the session knows of NAME
//   #pragma cling add_include_path("dir")
//   #pragma cling add_library_path("dir")
//   #pragma cling load("name")            a shared library: a path, or a name looked up
//                                         in the library path, then the system's
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
    enum class Kind {
        code,          ///< C++ for the session (line magics already turned into C++)
        file,          ///< %%file
        rank_library,  ///< %%mpify: `code` is the library's source
        help,          ///< ?NAME: `help_name`
    };
    Kind kind = Kind::code;
    std::optional<FileCell> file;         ///< for a %%file cell
    std::vector<Directive> directives;    ///< in the order they appear
    std::string code;                     ///< what clang compiles (pragma lines blanked)
    std::string help_name;                ///< for a help cell
    std::vector<std::string> rank_flags;  ///< %%mpify's compiler flags
    std::vector<std::string> headers;     ///< the kernel's own headers the code needs first
};

/// Splits a cell into its magics, pragmas and C++ code. Throws std::invalid_argument on a
/// malformed magic or `#pragma cling` line, naming it.
Cell parse_cell(const std::string& text);

/// Finds a library for `#pragma cling load(name)`: `name` itself when it is a path, else
/// NAME, NAME.so and libNAME.so in each folder of `search`, in order, then in the
/// system's library folders (LD_LIBRARY_PATH, /etc/ld.so.conf's, the standard ones),
/// where a versioned libNAME.so.N counts too. Throws std::runtime_error naming the
/// library and every folder searched.
std::string find_library(const std::string& name, const std::vector<std::string>& search);

}  // namespace mpify_kernel
