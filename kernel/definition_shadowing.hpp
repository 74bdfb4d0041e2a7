#pragma once
// A later cell may define a name again: `int n = 11;` after `int n = 10;`, a function or
// a class edited and its cell run again, `int main()` in every cell of a tutorial.
// xeus-cling allows it (cling's "definition shadowing"); plain clang-repl says
// "redefinition of 'n'". The kernel does it in two halves:
// - each cell's own definitions go into an inline namespace of their own
//   (`inline namespace __mpify_cell_7 { int n = 11; }`): their linker names differ from
//   the earlier ones' (the JIT holds both), and no redefinition is diagnosed;
// - where such a run of definitions ends, a pragma hides the earlier cells' declarations
//   of the same names from name lookup, and a header's at global scope (`double y1` hides
//   <cmath>'s Bessel function `y1`, as in cling), so that what follows sees the newest.
//   Overloads stay (a new `f(double)` beside `f(int)`), and a declaration that is not a
//   definition (`struct A;`, `int f(int);`) never hides a definition.
// - a cell's declaration of a function that the process defines at global scope (`int
//   lib_fn(int);` for a loaded library's function) keeps that global linker name, so its
//   calls reach the library's definition.
// Code compiled before keeps what it was compiled with, as in cling: a function of cell 3
// that reads `n` reads cell 3's `n`.
#include <string>

namespace clang {
class CompilerInstance;
}

namespace mpify_kernel {

/// `code` with its definitions wrapped for shadowing (cpp_text.hpp's wrap_definitions),
/// in the namespace numbered `number` (one number per cell, unique in the session).
std::string with_definitions_shadowing(const std::string& code, unsigned number);

/// Registers the pragma that hides the earlier declarations, with the interpreter's
/// preprocessor. Call once, before the first cell.
void install_definition_shadowing(clang::CompilerInstance& compiler);

/// Clang's diagnostics for a wrapped cell as if it had not been: the namespace and pragma
/// taken out of the quoted source lines, and the carets under them moved to match.
std::string without_shadowing_text(const std::string& diagnostics);

/// `text` without the cell namespaces' names (`__mpify_cell_7::A` is the user's `A`).
std::string without_cell_namespaces(std::string text);

}  // namespace mpify_kernel
