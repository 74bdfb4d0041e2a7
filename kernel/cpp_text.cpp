#include "cpp_text.hpp"

#include <algorithm>
#include <cstring>
#include <array>
#include <cctype>
#include <vector>

namespace mpify_kernel {
namespace {

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The code as the analyses below want to see it, at the same length: comments become
// spaces, a literal keeps its quotes with its content as 'x', and each preprocessor
// line (with its continuations) becomes spaces, its extent remembered.
struct Masked {
    std::string text;
    struct Range {
        std::size_t begin, end;
    };
    std::vector<Range> directives;
    bool open_comment = false;  // the code ends inside a /* comment
    bool open_literal = false;  // ... inside a string or character literal
};

// True when the quote at `quote` closes a raw string's prefix: R"..., u8R"..., LR"...
bool starts_raw_string(const std::string& code, std::size_t quote) {
    if (quote == 0 || code[quote - 1] != 'R') return false;
    std::size_t start = quote - 1;
    while (start > 0 && is_identifier_char(code[start - 1])) --start;
    const std::string prefix = code.substr(start, quote - 1 - start);
    return prefix.empty() || prefix == "u8" || prefix == "u" || prefix == "U" || prefix == "L";
}

// True when the apostrophe at `at` separates digits (1'000'000) rather than opening a
// character literal.
bool is_digit_separator(const std::string& code, std::size_t at) {
    if (at == 0 || !is_identifier_char(code[at - 1])) return false;
    std::size_t start = at;
    while (start > 0 && (is_identifier_char(code[start - 1]) || code[start - 1] == '\'')) --start;
    return std::isdigit(static_cast<unsigned char>(code[start])) != 0;
}

// Overwrites text[from, to) with `with`, line breaks kept: the masked text keeps the
// code's lines.
void overwrite(std::string& text, std::size_t from, std::size_t to, char with) {
    for (std::size_t k = from; k < to && k < text.size(); ++k)
        if (text[k] != '\n') text[k] = with;
}

// Where the preprocessor line whose '#' is at `hash` ends: its line break, once backslash
// continuations are followed, or the end of the code.
std::size_t directive_end(const std::string& code, std::size_t hash) {
    std::size_t end = hash;
    while (true) {
        end = code.find('\n', end);
        if (end == std::string::npos) return code.size();
        std::size_t last = end;
        while (last > hash && (code[last - 1] == ' ' || code[last - 1] == '\t' || code[last - 1] == '\r')) --last;
        if (last > hash && code[last - 1] == '\\') {
            ++end;
            continue;
        }
        return end;
    }
}

// Just past the raw string whose opening quote is at `quote` (starts_raw_string), or npos
// when the code ends inside it.
std::size_t raw_string_end(const std::string& code, std::size_t quote) {
    const std::size_t open = code.find('(', quote);
    if (open == std::string::npos) return std::string::npos;
    const std::string closing = ")" + code.substr(quote + 1, open - quote - 1) + "\"";
    const std::size_t end = code.find(closing, open);
    return end == std::string::npos ? end : end + closing.size();
}

Masked mask(const std::string& code) {
    Masked out;
    out.text = code;
    std::string& text = out.text;
    bool line_start = true;  // only white space so far on this line
    std::size_t i = 0;
    while (i < code.size()) {
        const char c = code[i];
        const char next = i + 1 < code.size() ? code[i + 1] : '\0';
        if (c == '\n') {
            line_start = true;
            ++i;
        } else if (c == '/' && next == '/') {
            const std::size_t end = code.find('\n', i);
            overwrite(text, i, end == std::string::npos ? code.size() : end, ' ');
            i = end == std::string::npos ? code.size() : end;
        } else if (c == '/' && next == '*') {
            const std::size_t end = code.find("*/", i + 2);
            out.open_comment = end == std::string::npos;
            overwrite(text, i, out.open_comment ? code.size() : end + 2, ' ');
            i = out.open_comment ? code.size() : end + 2;
        } else if (c == '#' && line_start) {
            const std::size_t end = directive_end(code, i);
            out.directives.push_back({i, end});
            overwrite(text, i, end, ' ');
            i = end;
        } else if (c == '"' && starts_raw_string(code, i)) {
            const std::size_t end = raw_string_end(code, i);
            out.open_literal = end == std::string::npos;
            const std::size_t stop = out.open_literal ? code.size() : end;
            overwrite(text, i + 1, stop - 1, 'x');
            i = stop;
            line_start = false;
        } else if ((c == '"' || c == '\'') && !(c == '\'' && is_digit_separator(code, i))) {
            std::size_t k = i + 1;
            while (k < code.size() && code[k] != c && code[k] != '\n') k += code[k] == '\\' ? 2 : 1;
            out.open_literal = out.open_literal || k >= code.size() || code[k] == '\n';
            const std::size_t stop = std::min(k + 1, code.size());
            overwrite(text, i + 1, std::min(k, code.size()), 'x');
            i = stop;
            line_start = false;
        } else {
            if (c != ' ' && c != '\t' && c != '\r') line_start = false;
            ++i;
        }
    }
    return out;
}

// The identifier that ends just before `at` (skipping white space), and where it starts.
std::string word_before(const std::string& text, std::size_t at, std::size_t* start = nullptr) {
    std::size_t end = at;
    while (end > 0 && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
    std::size_t begin = end;
    while (begin > 0 && is_identifier_char(text[begin - 1])) --begin;
    if (start) *start = begin;
    return text.substr(begin, end - begin);
}

// The position of the bracket that `close` (a ')' or '>' at `at`) closes, scanning back;
// npos when none does.
std::size_t opening_bracket(const std::string& text, std::size_t at, char open, char close) {
    int depth = 0;
    for (std::size_t i = at + 1; i-- > 0;) {
        if (text[i] == close) ++depth;
        if (text[i] == open && --depth == 0) return i;
    }
    return std::string::npos;
}

// True when the '{' that follows `before` (the end of what precedes it) opens a lambda's
// body: `[](int x) {`, `[] {`, `[](int x) mutable -> int {`, `[]<class T>(T x) {`.
bool opens_lambda_body(const std::string& text, std::size_t before) {
    std::size_t i = before;
    // Back over specifiers and a trailing return type, to the parameters' ')' or the ']'.
    while (i > 0 && (is_identifier_char(text[i - 1]) || std::isspace(static_cast<unsigned char>(text[i - 1])) ||
                     std::strchr("&*:<>-", text[i - 1]) != nullptr))
        --i;
    if (i == 0) return false;
    if (text[i - 1] == ']') return true;
    if (text[i - 1] != ')') return false;
    std::size_t open = opening_bracket(text, i - 1, '(', ')');
    while (open != std::string::npos && open > 0 && std::isspace(static_cast<unsigned char>(text[open - 1]))) --open;
    if (open == std::string::npos || open == 0) return false;
    if (text[open - 1] == ']') return true;
    if (text[open - 1] != '>') return false;  // a template lambda's parameters: []<class T>(T x)
    std::size_t angle = opening_bracket(text, open - 1, '<', '>');
    while (angle != std::string::npos && angle > 0 && std::isspace(static_cast<unsigned char>(text[angle - 1])))
        --angle;
    return angle != std::string::npos && angle > 0 && text[angle - 1] == ']';
}

// True when the '{' at `at` (in masked text) opens a block (a function body, a
// control statement's, a namespace's) rather than a braced initializer (S{1, 2}) or a
// lambda's body (which belongs to the expression around it).
bool opens_block(const std::string& text, std::size_t at) {
    std::size_t before = at;
    while (before > 0 && std::isspace(static_cast<unsigned char>(text[before - 1]))) --before;
    if (before == 0) return true;
    if (opens_lambda_body(text, before)) return false;
    const char previous = text[before - 1];
    if (previous == ')' || previous == '"' || previous == ';' || previous == '}' || previous == '{') return true;
    if (!is_identifier_char(previous)) return false;
    std::size_t word_start = 0;
    const std::string word = word_before(text, before, &word_start);
    static const std::array<const char*, 9> block_words = {"else",     "do",    "try",      "namespace", "const",
                                                           "noexcept", "final", "override", "mutable"};
    if (std::find(block_words.begin(), block_words.end(), word) != block_words.end()) return true;
    const std::string earlier = word_before(text, word_start);
    return earlier == "namespace" || earlier == "struct" || earlier == "class" || earlier == "union" ||
           earlier == "enum";
}

// Statements that start with these are no expression: their value is nothing to show.
bool starts_with_statement_keyword(const std::string& tail) {
    std::size_t end = 0;
    while (end < tail.size() && is_identifier_char(tail[end])) ++end;
    static const std::array<const char*, 34> keywords = {
        "if",       "for",       "while",     "do",        "switch",        "return",      "break",
        "continue", "goto",      "case",      "default",   "using",         "typedef",     "namespace",
        "class",    "struct",    "union",     "enum",      "template",      "extern",      "static",
        "inline",   "constexpr", "virtual",   "friend",    "public",        "private",     "protected",
        "try",      "auto",      "consteval", "constinit", "static_assert", "thread_local"};
    const std::string word = tail.substr(0, end);
    return std::find(keywords.begin(), keywords.end(), word) != keywords.end();
}

}  // namespace

LeadingDirectives split_leading_directives(const std::string& code) {
    const Masked masked = mask(code);
    // The block ends before the first line that holds anything but directives, comments
    // and white space.
    std::size_t block_end = 0, line_begin = 0;
    bool has_include = false;
    int conditionals = 0;  // #if... minus #endif: a block that leaves one open is not split
    while (line_begin < code.size()) {
        std::size_t line_end = code.find('\n', line_begin);
        if (line_end == std::string::npos) line_end = code.size();
        const auto directive =
            std::find_if(masked.directives.begin(), masked.directives.end(),
                         [&](const Masked::Range& d) { return d.begin >= line_begin && d.begin < line_end; });
        if (directive != masked.directives.end()) {
            std::string words = code.substr(directive->begin + 1, directive->end - directive->begin - 1);
            words.erase(0, words.find_first_not_of(" \t"));
            has_include = has_include || words.rfind("include", 0) == 0;
            if (words.rfind("if", 0) == 0) ++conditionals;
            if (words.rfind("endif", 0) == 0) --conditionals;
            line_end = std::max(line_end, directive->end);
        } else if (masked.text.find_first_not_of(" \t\r", line_begin) < line_end) {
            break;
        }
        block_end = line_end == code.size() ? code.size() : line_end + 1;
        line_begin = block_end;
    }
    if (!has_include || conditionals != 0 || masked.open_comment) return {std::string(), code};
    const auto lines = static_cast<std::size_t>(std::count(code.begin(), code.begin() + block_end, '\n'));
    return {code.substr(0, block_end), std::string(lines, '\n') + code.substr(block_end)};
}

namespace {

// The top-level statements and declarations of masked text, in order: each ends after a
// ';' at depth 0, a '}' closing a block at depth 0, or a preprocessor line; the last one
// may run to the end without any of these (`open_end`). No pieces when the brackets do
// not balance.
struct Pieces {
    std::vector<Span> spans;
    bool open_end = false;  // the last piece is what follows the last ';', block or directive
};

Pieces top_level_pieces(const Masked& masked) {
    const std::string& text = masked.text;
    std::vector<std::size_t> ends;
    int depth = 0;
    std::vector<bool> block_stack;  // for each open '{': does it open a block at depth 0?
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '(' || c == '[') {
            ++depth;
        } else if (c == ')' || c == ']') {
            if (--depth < 0) return {};
        } else if (c == '{') {
            block_stack.push_back(depth == 0 && opens_block(text, i));
            ++depth;
        } else if (c == '}') {
            if (--depth < 0 || block_stack.empty()) return {};
            const bool block = block_stack.back();
            block_stack.pop_back();
            if (depth == 0 && block) ends.push_back(i + 1);
        } else if (c == ';' && depth == 0) {
            ends.push_back(i + 1);
        }
    }
    if (depth != 0) return {};
    for (const Masked::Range& directive : masked.directives) ends.push_back(directive.end);
    std::sort(ends.begin(), ends.end());
    Pieces pieces;
    std::size_t begin = 0;
    for (const std::size_t end : ends) {
        if (end > begin) pieces.spans.push_back({begin, end});
        begin = std::max(begin, end);
    }
    if (begin < text.size()) {
        pieces.spans.push_back({begin, text.size()});
        pieces.open_end = true;
    }
    return pieces;
}

// `piece` without the white space around it (masked: comments count as white space).
Span trimmed(const std::string& text, Span piece) {
    const std::size_t begin = text.find_first_not_of(" \t\r\n", piece.begin);
    if (begin == std::string::npos || begin >= piece.end) return {piece.end, piece.end};
    std::size_t end = piece.end;
    while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
    return {begin, end};
}

// True when the piece is a statement (an expression, a call, a loop), not a declaration:
// it starts with a statement keyword, an operator, or a (qualified, templated) name that
// no second name follows (`std::sort(...)`, not `std::vector<int> v`).
bool is_statement(const std::string& text, Span piece) {
    std::size_t i = piece.begin;
    auto skip_space = [&] {
        while (i < piece.end && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    };
    auto read_word = [&] {
        const std::size_t from = i;
        while (i < piece.end && is_identifier_char(text[i])) ++i;
        return text.substr(from, i - from);
    };
    skip_space();
    if (i >= piece.end) return false;
    if (!is_identifier_char(text[i]) && text[i] != ':') return text[i] != '#';  // ++x, *p = 1, (void)f()
    static const std::array<const char*, 14> statement_words = {"for",    "while",  "do",      "if",     "else",
                                                                "switch", "case",   "default", "return", "throw",
                                                                "try",    "delete", "goto",    "break"};
    std::string word = read_word();
    if (std::find(statement_words.begin(), statement_words.end(), word) != statement_words.end()) return true;
    // A (qualified, templated) name: ns::name<args>::more...
    while (true) {
        skip_space();
        // `cout << x`, `a <= b`: an operator, so a statement.
        if (i + 1 < piece.end && text[i] == '<' && (text[i + 1] == '<' || text[i + 1] == '=')) return true;
        if (i < piece.end && text[i] == '<') {  // template arguments, balanced
            int angles = 0;
            for (; i < piece.end; ++i) {
                if (text[i] == '<') ++angles;
                if (text[i] == '>' && --angles == 0) {
                    ++i;
                    break;
                }
                if (text[i] == ';' || text[i] == '{') return false;
            }
            skip_space();
        }
        if (i + 1 < piece.end && text[i] == ':' && text[i + 1] == ':') {
            i += 2;
            skip_space();
            word = read_word();
            continue;
        }
        break;
    }
    while (i < piece.end && (text[i] == '*' || text[i] == '&' || std::isspace(static_cast<unsigned char>(text[i]))))
        ++i;
    // A second name: a declaration (`Type name`), unless the first was a keyword-like type.
    return !(i < piece.end && is_identifier_char(text[i]));
}

// True when the piece holds a lambda: a '[' that does not index (what precedes it is
// not a name, a ')' or a ']').
bool holds_lambda(const std::string& text, Span piece) {
    for (std::size_t i = piece.begin; i < piece.end; ++i) {
        if (text[i] != '[') continue;
        std::size_t before = i;
        while (before > piece.begin && std::isspace(static_cast<unsigned char>(text[before - 1]))) --before;
        if (before == piece.begin) return true;
        const char previous = text[before - 1];
        if (!is_identifier_char(previous) && previous != ')' && previous != ']' && previous != '"' && previous != '\'')
            return true;
        if (is_identifier_char(previous) && word_before(text, before) == "return") return true;
    }
    return false;
}

// The name a declaration declares: the last one before the first '(', '=', '{', '[', ';'
// or lone ':' outside template arguments (`operator<` included). `qualified` when it is
// (`void A::f()`, `int A::n = 0;`, `A::~A()`, `bool A::operator<(...)`).
struct DeclaredName {
    std::size_t begin = std::string::npos, end = std::string::npos;
    bool qualified = false;
};

DeclaredName declared_name(const std::string& text, Span piece) {
    DeclaredName name;
    std::size_t i = piece.begin;
    if (text.compare(i, 8, "template") == 0) {  // skip the template head
        int angles = 0;
        for (; i < piece.end; ++i) {
            if (text[i] == '<') ++angles;
            if (text[i] == '>' && --angles == 0) break;
        }
    }
    int angles = 0;
    for (; i < piece.end; ++i) {
        const char c = text[i];
        if (is_identifier_char(c)) {
            std::size_t end = i;
            while (end < piece.end && is_identifier_char(text[end])) ++end;
            if (angles == 0) name.begin = i, name.end = end;
            if (angles == 0 && text.compare(i, end - i, "operator") == 0 && end - i == 8) break;
            i = end - 1;
        } else if (c == '<') {
            ++angles;
        } else if (c == '>' && angles > 0) {
            --angles;
        } else if (angles == 0 && (c == '(' || c == '=' || c == '{' || c == '[' || c == ';')) {
            break;
        } else if (angles == 0 && c == ':' && !(i + 1 < piece.end && text[i + 1] == ':') &&
                   !(i > piece.begin && text[i - 1] == ':')) {
            break;
        }
    }
    if (name.begin == std::string::npos) return name;
    std::size_t before = name.begin;
    auto skip_space = [&] {
        while (before > piece.begin && std::isspace(static_cast<unsigned char>(text[before - 1]))) --before;
    };
    skip_space();
    if (before > piece.begin && text[before - 1] == '~') {
        --before;
        skip_space();
    }
    name.qualified = before >= piece.begin + 2 && text[before - 1] == ':' && text[before - 2] == ':';
    return name;
}

// `extern int lib_fn(int);`: a function declared extern (redundantly, as xeus-cling users
// do for a loaded library's function), not a variable or a linkage block (`extern "C"`).
// It is wrapped like `int lib_fn(int);`, so that both bind to the same definition, and a
// cell that declares it again either way replaces the earlier declaration instead of
// making a second one that calls find ambiguous.
bool is_extern_function_declaration(const std::string& text, Span piece) {
    std::size_t i = piece.begin + 6;  // past "extern"
    while (i < piece.end && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i >= piece.end || text[i] == '"' || text[piece.end - 1] != ';') return false;
    const DeclaredName name = declared_name(text, {i, piece.end});
    if (name.begin == std::string::npos || name.qualified) return false;
    static const std::array<const char*, 12> type_words = {"int",   "char", "void",     "long",   "short",    "double",
                                                           "float", "bool", "unsigned", "signed", "volatile", "const"};
    const std::string word = text.substr(name.begin, name.end - name.begin);
    if (std::find(type_words.begin(), type_words.end(), word) != type_words.end()) return false;  // `int (*fp)(int)`
    std::size_t after = name.end;
    while (after < piece.end && std::isspace(static_cast<unsigned char>(text[after]))) ++after;
    return after < piece.end && text[after] == '(';
}

// The words a declaration starts with that keep it out of wrap_definitions: it names
// something else (namespace, using), or it must stay where it is (extern, friend, ...).
bool starts_with_unwrappable_word(const std::string& text, Span piece) {
    static const std::array<const char*, 8> words = {"namespace", "extern", "friend", "static_assert",
                                                     "asm",       "export", "module", "import"};
    std::size_t i = piece.begin;
    auto next_word = [&] {
        while (i < piece.end && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        const std::size_t from = i;
        while (i < piece.end && is_identifier_char(text[i])) ++i;
        return text.substr(from, i - from);
    };
    const std::string first = next_word();
    if (first == "extern") return !is_extern_function_declaration(text, piece);
    if (std::find(words.begin(), words.end(), first) != words.end()) return true;
    if (first == "inline") return next_word() == "namespace";
    if (first == "using") {  // only an alias, `using Name = ...;`, is a definition
        next_word();
        while (i < piece.end && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        return !(i < piece.end && text[i] == '=');
    }
    if (first == "template") {  // `template <>` specializes, `template class X<int>;` instantiates
        while (i < piece.end && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        if (i >= piece.end || text[i] != '<') return true;
        ++i;
        while (i < piece.end && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        return i < piece.end && text[i] == '>';
    }
    return false;
}

bool is_wrappable_definition(const std::string& text, Span piece) {
    return piece.begin < piece.end && is_identifier_char(text[piece.begin]) && !is_statement(text, piece) &&
           !starts_with_unwrappable_word(text, piece) && !declared_name(text, piece).qualified;
}

// Where `int main() { ... }` ends, in a piece that defines it: main in a namespace is a
// function like any other, and one that ends without `return` would trap, where the
// program's main returns 0. The wrapped main gets that `return 0;`.
std::optional<std::size_t> end_of_int_main(const std::string& text, Span piece) {
    const DeclaredName name = declared_name(text, piece);
    if (name.begin == std::string::npos || text.compare(name.begin, name.end - name.begin, "main") != 0 ||
        name.end - name.begin != 4 || text.compare(piece.begin, 4, "int ") != 0 || text[piece.end - 1] != '}')
        return std::nullopt;
    return piece.end - 1;
}

}  // namespace

std::string wrap_definitions(const std::string& code, const std::string& opening, const std::string& closing) {
    const Masked masked = mask(code);
    if (masked.open_comment || masked.open_literal) return code;
    const Pieces pieces = top_level_pieces(masked);
    std::vector<Span> runs;  // [first definition's begin, last one's end)
    std::vector<std::size_t> mains;  // where `int main()`'s body ends
    bool run_open = false;
    for (std::size_t p = 0; p < pieces.spans.size(); ++p) {
        const Span piece = trimmed(masked.text, pieces.spans[p]);
        const bool last_without_end = pieces.open_end && p + 1 == pieces.spans.size();
        if (piece.end == piece.begin + 1 && masked.text[piece.begin] == ';') {  // `struct A {...}` then its ';'
            if (run_open) runs.back().end = piece.end;
        } else if (!last_without_end && is_wrappable_definition(masked.text, piece)) {
            if (const auto main_end = end_of_int_main(masked.text, piece)) mains.push_back(*main_end);
            // The run starts with the comments before its first definition: a comment
            // documents what follows it, not the namespace.
            if (!run_open)
                runs.push_back({std::min(piece.begin, code.find_first_not_of(" \t\r\n", pieces.spans[p].begin)),
                                piece.end});
            runs.back().end = piece.end;
            run_open = true;
        } else if (piece.begin != piece.end) {
            run_open = false;
        }
    }
    std::string out = code;
    for (auto run = runs.rbegin(); run != runs.rend(); ++run) {  // from the end: offsets stay right
        out.insert(run->end, closing);
        for (auto main_end = mains.rbegin(); main_end != mains.rend(); ++main_end)
            if (*main_end > run->begin && *main_end < run->end) out.insert(*main_end, " return 0; ");
        out.insert(run->begin, opening);
    }
    return out;
}

std::optional<Span> unterminated_last_statement(const std::string& code) {
    const Masked masked = mask(code);
    if (masked.open_comment || masked.open_literal) return std::nullopt;
    const Pieces pieces = top_level_pieces(masked);
    if (pieces.spans.empty() || !pieces.open_end) return std::nullopt;
    const Span last = trimmed(masked.text, pieces.spans.back());
    if (last.begin == last.end || masked.text[last.begin] == '#') return std::nullopt;
    return last;
}

std::optional<Span> trailing_expression(const std::string& code) {
    const std::optional<Span> last = unterminated_last_statement(code);
    if (!last) return std::nullopt;
    if (starts_with_statement_keyword(code.substr(last->begin, last->end - last->begin))) return std::nullopt;
    return last;
}

std::string wrap_statements_with_lambdas(const std::string& code, unsigned& counter) {
    const Masked masked = mask(code);
    if (masked.open_comment || masked.open_literal) return code;
    std::string out = code;
    const std::vector<Span> pieces = top_level_pieces(masked).spans;
    for (auto piece = pieces.rbegin(); piece != pieces.rend(); ++piece) {  // from the end: offsets stay right
        const Span statement = trimmed(masked.text, *piece);
        if (statement.begin == statement.end || !is_statement(masked.text, statement) ||
            !holds_lambda(masked.text, statement))
            continue;
        const std::string name = "__mpify_statement_" + std::to_string(++counter);
        std::string body = code.substr(statement.begin, statement.end - statement.begin);
        if (masked.text[statement.end - 1] != ';' && masked.text[statement.end - 1] != '}') body += ';';
        out.replace(statement.begin, statement.end - statement.begin,
                    "void " + name + "() { " + body + " } " + name + "();");
    }
    return out;
}

std::vector<bool> top_level_line_starts(const std::string& code) {
    const Masked masked = mask(code);
    const std::string& text = masked.text;
    std::vector<bool> starts;
    int depth = 0;
    char last = ';';  // the last significant character: nothing yet counts as after a ';'
    std::size_t begin = 0;
    while (begin <= text.size()) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) end = text.size();
        const bool start = depth == 0 && (last == ';' || last == '}' || last == '{');
        starts.push_back(start);
        const std::size_t first = text.find_first_not_of(" \t\r", begin);
        if (start && first < end && (text[first] == '%' || text[first] == '!')) {
            last = ';';  // a magic line is a statement of its own, whatever it holds
        } else {
            for (std::size_t i = begin; i < end; ++i) {
                const char c = text[i];
                if (c == '(' || c == '[' || c == '{') ++depth;
                if (c == ')' || c == ']' || c == '}') --depth;
                if (!std::isspace(static_cast<unsigned char>(c))) last = c;
            }
        }
        begin = end + 1;
    }
    return starts;
}

std::string completeness(const std::string& code) {
    const Masked masked = mask(code);
    int depth = 0;
    for (const char c : masked.text) {
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && --depth < 0) return "invalid";
    }
    if (masked.open_literal) return "invalid";
    const std::size_t last = code.find_last_not_of(" \t\r\n");
    const bool continued = last != std::string::npos && code[last] == '\\';
    return depth > 0 || masked.open_comment || continued ? "incomplete" : "complete";
}

}  // namespace mpify_kernel
