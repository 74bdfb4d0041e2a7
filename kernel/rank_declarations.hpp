#pragma once
// A %%mpify cell is compiled twice over: into a library by mpify::load_source (the code
// the ranks run, the caller's rank included), and into the session as declarations only,
// so that the next cells can name what the library defines. This file computes the
// second from clang's parse of the cell: each function the library defines loses its
// body (`int f(int x) { ... }` becomes `int f(int x);`), a member function defined
// outside its class and a static member's definition disappear (the class declares
// them), a global variable becomes `extern`, and MPIFY_REGISTER lines go (the library
// registers). Inline functions, templates, constexpr, classes, and anything with
// internal linkage stay as written: the session compiles its own copy, as a program's
// translation units do.
#include "declarations.hpp"

#include <string>

namespace clang {
struct PartialTranslationUnit;
class SourceManager;
}  // namespace clang

namespace mpify_kernel {

/// The edits that turn the parsed cell into declarations, as text (one per line:
/// "offset length kind name"); computed in the pre-check child, applied by the kernel.
std::string encode_rank_edits(clang::PartialTranslationUnit& unit, const clang::SourceManager& sources);

/// Applies encode_rank_edits' edits to `code` (the text that was parsed).
Declarations apply_rank_edits(const std::string& code, const std::string& edits);

}  // namespace mpify_kernel
