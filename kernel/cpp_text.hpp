#pragma once
// C++ source read as text, before clang sees it: where a cell's leading #include block
// ends, whether it ends in an expression whose value the notebook should show, whether
// its brackets are balanced. Comments, string and character literals (raw strings
// included) are skipped, so a bracket or a ';' inside them counts for nothing.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace mpify_kernel {

/// A cell cut in two: its leading preprocessor lines (with the comments and blank lines
/// among them), and the rest with those lines left blank, so that clang's line numbers
/// in the rest stay the cell's.
struct LeadingDirectives {
    std::string directives;  ///< empty when the cell does not start with an #include
    std::string rest;
};

/// Splits off the block of preprocessor lines the cell starts with, when it holds an
/// #include. (Those run as a step of their own, as in xeus-cling: a header is parsed once,
/// in the session, and not again by the pre-check of the cell's code.)
LeadingDirectives split_leading_directives(const std::string& code);

/// Where the cell's last statement is an expression without its ';' (a notebook shows
/// that value): [begin, end) of the expression in `code`. None when the cell ends with
/// ';', with a block, or with a statement that is no expression (`return`, `if`, ...).
struct Span {
    std::size_t begin = 0, end = 0;
};
std::optional<Span> trailing_expression(const std::string& code);

/// Where the cell's last statement, of any kind, lacks its ';' (`auto f = [](int x) {
/// ... }` as the last line): [begin, end) of it in `code`. None when the cell ends with
/// ';' or with a block.
std::optional<Span> unterminated_last_statement(const std::string& code);

/// Moves each top-level statement that holds a lambda into a function of its own, called
/// in its place: `std::sort(v.begin(), v.end(), [](int a, int b) { ... });` becomes
/// `void __mpify_statement_N() { std::sort(...); } __mpify_statement_N();`, on the same
/// lines. clang 19 crashes, at random, naming a lambda whose context is a top-level
/// statement (its mangler takes the statement for a named declaration; fixed upstream in
/// 2026); inside a function the lambda is named as in any program. `counter` makes the
/// names unique in the session.
std::string wrap_statements_with_lambdas(const std::string& code, unsigned& counter);

/// Puts each run of the cell's own top-level definitions (variables, functions, classes,
/// enums, aliases, templates) between `opening` and `closing`, on the lines where they
/// are: `int n = 11; std::cout << n;` becomes `<opening>int n = 11;<closing> std::cout << n;`.
/// Left where they are: statements, preprocessor lines, namespaces, using-directives and
/// using-declarations, `extern` declarations but of functions, explicit specializations and
/// instantiations, definitions of a qualified name (`void A::f() {}`: a member of
/// something declared before), and a last declaration without its ';'.
std::string wrap_definitions(const std::string& code, const std::string& opening, const std::string& closing);

/// For each line of `code`: true when a statement starts there at top level (outside
/// any bracket, comment or literal, after a ';', a block or nothing at all).
std::vector<bool> top_level_line_starts(const std::string& code);

/// Jupyter's is_complete answer for `code`: "complete", "incomplete" (an open bracket,
/// or comment, or a trailing backslash: the front end continues the cell) or "invalid"
/// (a closing bracket without its opening one, a string literal left open).
std::string completeness(const std::string& code);

}  // namespace mpify_kernel
