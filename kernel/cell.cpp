#include "cell.hpp"

#include <sys/stat.h>

#include <regex>
#include <stdexcept>

namespace mpify_kernel {
namespace {

bool is_regular_file(const std::string& path) {
    struct stat info {};
    return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

}  // namespace

Cell parse_cell(const std::string& text) {
    Cell cell;
    if (text.rfind("%%file", 0) == 0) {
        const std::size_t end_of_line = text.find('\n');
        std::string name = text.substr(6, end_of_line == std::string::npos ? std::string::npos : end_of_line - 6);
        name.erase(0, name.find_first_not_of(" \t"));
        name.erase(name.find_last_not_of(" \t\r") + 1);
        if (name.empty()) throw std::invalid_argument("%%file needs a file name: %%file NAME, then the file's text");
        std::string content = end_of_line == std::string::npos ? "" : text.substr(end_of_line + 1);
        if (!content.empty() && content.back() != '\n') content += '\n';
        cell.file = FileCell{std::move(name), std::move(content)};
        return cell;
    }

    static const std::regex pragma_start(R"(^\s*#\s*pragma\s+cling\b.*)");
    static const std::regex pragma(
        R"re(^\s*#\s*pragma\s+cling\s+(add_include_path|add_library_path|load)\s*\(\s*"([^"]*)"\s*\)\s*(//.*)?$)re");
    std::size_t begin = 0;
    int line_number = 0;
    while (begin <= text.size()) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(begin, end - begin);
        ++line_number;
        std::smatch match;
        if (std::regex_match(line, match, pragma)) {
            const std::string kind = match[1];
            cell.directives.push_back({kind == "add_include_path"   ? Directive::Kind::add_include_path
                                       : kind == "add_library_path" ? Directive::Kind::add_library_path
                                                                    : Directive::Kind::load,
                                       match[2], line_number});
        } else if (std::regex_match(line, pragma_start)) {
            throw std::invalid_argument("line " + std::to_string(line_number) + ": `" + line +
                                        "`: this kernel knows #pragma cling add_include_path(\"dir\"), "
                                        "add_library_path(\"dir\") and load(\"library\")");
        } else {
            cell.code += line;
        }
        if (end < text.size()) cell.code += '\n';
        begin = end + 1;
    }
    return cell;
}

std::string completeness(const std::string& code) {
    int depth = 0;
    enum { plain, line_comment, block_comment, string_literal, char_literal } state = plain;
    for (std::size_t i = 0; i < code.size(); ++i) {
        const char c = code[i];
        const char next = i + 1 < code.size() ? code[i + 1] : '\0';
        switch (state) {
            case plain:
                if (c == '/' && next == '/') state = line_comment, ++i;
                else if (c == '/' && next == '*') state = block_comment, ++i;
                else if (c == '"') state = string_literal;
                else if (c == '\'') state = char_literal;
                else if (c == '(' || c == '[' || c == '{') ++depth;
                else if (c == ')' || c == ']' || c == '}') {
                    if (--depth < 0) return "invalid";
                }
                break;
            case line_comment:
                if (c == '\n') state = plain;
                break;
            case block_comment:
                if (c == '*' && next == '/') state = plain, ++i;
                break;
            case string_literal:
            case char_literal:
                if (c == '\\') ++i;
                else if (c == (state == string_literal ? '"' : '\'')) state = plain;
                break;
        }
    }
    const std::size_t last = code.find_last_not_of(" \t\r\n");
    const bool continued = last != std::string::npos && code[last] == '\\';
    if (state == string_literal || state == char_literal) return "invalid";  // an unterminated literal
    return depth > 0 || state == block_comment || continued ? "incomplete" : "complete";
}

std::string find_library(const std::string& name, const std::vector<std::string>& search) {
    if (name.find('/') != std::string::npos) {
        if (is_regular_file(name)) return name;
        throw std::runtime_error("#pragma cling load(\"" + name + "\"): no such file");
    }
    std::vector<std::string> candidates = {name, name + ".so"};
    if (name.rfind("lib", 0) != 0) candidates.push_back("lib" + name + ".so");
    for (const std::string& folder : search)
        for (const std::string& candidate : candidates)
            if (is_regular_file(folder + "/" + candidate)) return folder + "/" + candidate;
    std::string tried, searched;
    for (const std::string& candidate : candidates) tried += (tried.empty() ? "" : " or ") + candidate;
    for (const std::string& folder : search) searched += (searched.empty() ? "" : ", ") + folder;
    throw std::runtime_error("#pragma cling load(\"" + name + "\"): no " + tried + " in " +
                             (searched.empty() ? "any folder (add one with #pragma cling add_library_path)" : searched));
}

}  // namespace mpify_kernel
