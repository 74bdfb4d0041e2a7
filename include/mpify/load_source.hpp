#pragma once
// Functions written in a notebook, runnable on other processes. An interpreter keeps
// the code it compiles in its own memory, where no child process can reach it; so a
// notebook writes the functions to a file (xeus-cling's %%file magic) and load_source
// compiles that file into a shared library, loads it, and ranch runs its functions:
//
//   %%file square.cpp
//   #include <mpify/mpify.hpp>
//   int square(int x) { return x * x + mpify::local_rank(); }
//   MPIFY_REGISTER(square);
//
//   mpify::load_source("square.cpp");
//
//   int square(int);                     // next cell: declare what the file defines
//   mpify::ranch(3, square, 4);          // {16, 17, 18}
//
// The declaration goes into a later cell than load_source: an interpreter resolves
// all of a cell's symbols before it runs any of the cell.
#include <mpify/abi.hpp>
#include <mpify/error.hpp>
#include <mpify/export.hpp>

#include <string>
#include <vector>

MPIFY_BEGIN_NAMESPACE

/// The source did not compile; `what()` holds the command and the compiler's output.
class MPIFY_API CompileError : public Error {
public:
    using Error::Error;
};

/// How load_source compiles.
struct SourceOptions {
    /// Extra compiler flags, after mpify's own (`-I/my/headers`, `-DNDEBUG`, `-O3`...).
    std::vector<std::string> flags;
    /// Extra link inputs (`-lfoo`, `/path/libbar.so`).
    std::vector<std::string> libraries;
    /// Where compiled libraries are kept. Empty: $MPIFY_CACHE_DIR, else
    /// $XDG_CACHE_HOME/mpify, else ~/.cache/mpify (created when missing).
    std::string cache_dir;
    /// Print the compiler command to stderr when it runs.
    bool verbose = false;
};

/// Compiles the C++ file `path` into a shared library with the compiler and flags mpify
/// was built with (its C++ standard: 17, or 20 for a LibTorch that demands it; -O2;
/// mpify's and LibTorch's include directories and
/// definitions, linked against libmpify), loads it with RTLD_NOW | RTLD_GLOBAL (its
/// symbols become visible to an interpreter's later input, its MPIFY_REGISTERed
/// functions become rankable) and returns the library's path.
///
/// Loading an edited file again loads a new library beside the old one (code that points
/// into the old one keeps working); its functions are registered as the new version,
/// so `ranch` of the new library's function runs the new code in every rank. Name the
/// newest with `dlsym(dlopen(returned_path, RTLD_NOW | RTLD_NOLOAD), "fn")`:
/// `dlsym(RTLD_DEFAULT, ...)` finds the oldest. mpify's kernel does this for cells.
///
/// The library is cached under a name made from the file's content, the flags and
/// the libmpify in use: loading unchanged source again costs no compilation. Headers
/// the file includes are not part of that key; touch the file after changing one.
/// Throws UsageError when the file cannot be read or the cache folder cannot be
/// created, CompileError when the compiler fails, Error when the library does not load.
MPIFY_API std::string load_source(const std::string& path, const SourceOptions& options = {});

MPIFY_END_NAMESPACE

/// For interpreters that resolve a cell's names (mpify's Jupyter kernel): the function
/// with this linker (mangled) name in the newest library load_source loaded that defines
/// it, or nullptr. The process's own lookup (dlsym(RTLD_DEFAULT)) finds the oldest.
extern "C" MPIFY_API void* mpify_newest_source_function(const char* linker_name) noexcept;

/// How many distinct libraries load_source has loaded in this process: when it grows,
/// an interpreter forgets what mpify_newest_source_function told it before.
extern "C" MPIFY_API unsigned long mpify_source_generation() noexcept;
