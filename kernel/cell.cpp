#include "cell.hpp"

#include "cpp_text.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace mpify_kernel {
namespace {

bool is_regular_file(const std::string& path) {
    struct stat info{};
    return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::size_t begin = 0;
    while (begin <= text.size()) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) end = text.size();
        lines.push_back(text.substr(begin, end - begin));
        begin = end + 1;
    }
    return lines;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string text;
    for (std::size_t i = 0; i < lines.size(); ++i) text += (i ? "\n" : "") + lines[i];
    return text;
}

std::vector<std::string> words_of(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> words;
    for (std::string word; in >> word;) words.push_back(word);
    return words;
}

// "-n 100 -r 5 rest" -> loops, runs, and the rest (the timed statement of a line magic).
struct TimeitOptions {
    long long loops = 0;
    int runs = 0;
    std::string rest;
};

TimeitOptions timeit_options(const std::string& text, const std::string& magic) {
    static const std::regex option(R"(^\s*-([nr])\s*(\d+))");
    TimeitOptions options;
    std::string rest = text;
    std::smatch match;
    while (std::regex_search(rest, match, option)) {
        const long long value = std::stoll(match[2]);
        if (value <= 0) throw std::invalid_argument(magic + ": -" + match[1].str() + " wants a positive number");
        if (match[1] == "n") options.loops = value;
        else options.runs = static_cast<int>(std::min<long long>(value, 1000));
        rest = match.suffix();
    }
    const std::size_t first = rest.find_first_not_of(" \t");
    if (first != std::string::npos && rest[first] == '-')
        throw std::invalid_argument(magic + ": unknown option in `" + text + "` (it takes -n LOOPS and -r RUNS)");
    options.rest = first == std::string::npos ? "" : rest.substr(first);
    return options;
}

std::string timeit_call_head() { return "::mpify_kernel_timeit::run([]() {"; }
std::string timeit_call_tail(const TimeitOptions& options) {
    return "\n}, " + std::to_string(options.loops) + "LL, " + std::to_string(options.runs) + ");";
}

// A raw string literal that holds `text` whatever it contains.
std::string raw_literal(const std::string& text) {
    std::string delimiter = "mpify";
    while (text.find(")" + delimiter + "\"") != std::string::npos) delimiter += "_";
    return "R\"" + delimiter + "(" + text + ")" + delimiter + "\"";
}

// A #pragma cling line, recognised; other lines are left alone.
bool take_pragma(const std::string& line, int number, std::vector<Directive>& directives) {
    static const std::regex pragma_start(R"(^\s*#\s*pragma\s+cling\b.*)");
    static const std::regex pragma(
        R"re(^\s*#\s*pragma\s+cling\s+(add_include_path|add_library_path|load)\s*\(\s*"([^"]*)"\s*\)\s*(//.*)?$)re");
    std::smatch match;
    if (std::regex_match(line, match, pragma)) {
        const std::string kind = match[1];
        directives.push_back({kind == "add_include_path"   ? Directive::Kind::add_include_path
                              : kind == "add_library_path" ? Directive::Kind::add_library_path
                                                           : Directive::Kind::load,
                              match[2], number});
        return true;
    }
    if (std::regex_match(line, pragma_start))
        throw std::invalid_argument("line " + std::to_string(number) + ": `" + line +
                                    "`: this kernel knows #pragma cling add_include_path(\"dir\"), "
                                    "add_library_path(\"dir\") and load(\"library\")");
    return false;
}

// The body of a code cell: pragma lines blanked, line magics turned into C++ on their
// own line (so clang's line numbers stay the cell's).
void read_code(const std::vector<std::string>& lines, std::size_t first_line, Cell& cell) {
    std::vector<std::string> out = lines;
    for (std::size_t i = 0; i < first_line; ++i) out[i].clear();
    for (std::size_t i = first_line; i < lines.size(); ++i)
        if (take_pragma(lines[i], static_cast<int>(i + 1), cell.directives)) out[i].clear();
    const std::vector<bool> starts = top_level_line_starts(joined(out));
    for (std::size_t i = first_line; i < out.size(); ++i) {
        if (i >= starts.size() || !starts[i]) continue;
        const std::string& line = out[i];
        const std::size_t first = line.find_first_not_of(" \t");
        if (first == std::string::npos) continue;
        if (line.compare(first, 7, "%timeit") == 0 &&
            (line.size() == first + 7 || std::isspace(static_cast<unsigned char>(line[first + 7])))) {
            const TimeitOptions options = timeit_options(line.substr(first + 7), "%timeit");
            if (options.rest.empty())
                throw std::invalid_argument("line " + std::to_string(i + 1) + ": %timeit needs a statement to time");
            out[i] = timeit_call_head() + options.rest + ";" + timeit_call_tail(options).substr(1);
            cell.headers.push_back("mpify_kernel/timeit.hpp");
        } else if (line[first] == '!' && line.size() > first + 1 && line[first + 1] != '=') {
            out[i] = "::mpify_kernel_system(" + raw_literal(line.substr(first + 1)) + ");";
            cell.headers.push_back("mpify_kernel/system.hpp");
        } else if (line[first] == '%') {
            throw std::invalid_argument("line " + std::to_string(i + 1) + ": `" + line +
                                        "`: this kernel knows %timeit, and the cell magics %%file, %%mpify "
                                        "and %%timeit");
        }
    }
    cell.code = joined(out);
}

bool help_request(const std::string& text, std::string& name) {
    static const std::regex before(R"(^\s*\?{1,2}\s*([A-Za-z_][A-Za-z0-9_:]*)\s*$)");
    static const std::regex after(R"(^\s*([A-Za-z_][A-Za-z0-9_:]*)\s*\?{1,2}\s*$)");
    std::smatch match;
    if (!std::regex_match(text, match, before) && !std::regex_match(text, match, after)) return false;
    name = match[1];
    return true;
}

}  // namespace

Cell parse_cell(const std::string& text) {
    Cell cell;
    const std::vector<std::string> lines = lines_of(text);
    const std::string& first = lines.front();
    if (first.rfind("%%file", 0) == 0) {
        std::string name = first.substr(6);
        name.erase(0, name.find_first_not_of(" \t"));
        name.erase(name.find_last_not_of(" \t\r") + 1);
        if (name.empty()) throw std::invalid_argument("%%file needs a file name: %%file NAME, then the file's text");
        const std::size_t end_of_line = text.find('\n');
        std::string content = end_of_line == std::string::npos ? "" : text.substr(end_of_line + 1);
        if (!content.empty() && content.back() != '\n') content += '\n';
        cell.kind = Cell::Kind::file;
        cell.file = FileCell{std::move(name), std::move(content)};
        return cell;
    }
    if (first.rfind("%%mpify", 0) == 0 && (first.size() == 7 || std::isspace(static_cast<unsigned char>(first[7])))) {
        cell.kind = Cell::Kind::rank_library;
        cell.rank_flags = words_of(first.substr(7));
        read_code(lines, 1, cell);
        if (!cell.headers.empty())
            throw std::invalid_argument("%%mpify: a rank library's cell holds C++ only (no %timeit, no !command)");
        return cell;
    }
    if (first.rfind("%%timeit", 0) == 0 && (first.size() == 8 || std::isspace(static_cast<unsigned char>(first[8])))) {
        const TimeitOptions options = timeit_options(first.substr(8), "%%timeit");
        if (!options.rest.empty())
            throw std::invalid_argument("%%timeit: the code to time goes on the lines below, not after the options");
        read_code(lines, 1, cell);
        if (cell.code.find_first_not_of(" \t\r\n") == std::string::npos)
            throw std::invalid_argument("%%timeit needs code to time, on the lines below it");
        // Line 1 opens the timed lambda; the cell's own lines keep their numbers.
        cell.code = timeit_call_head() + cell.code + timeit_call_tail(options);
        cell.headers.push_back("mpify_kernel/timeit.hpp");
        return cell;
    }
    if (help_request(text, cell.help_name)) {
        cell.kind = Cell::Kind::help;
        return cell;
    }
    read_code(lines, 0, cell);
    return cell;
}

namespace {

// The folders the dynamic linker searches by itself: LD_LIBRARY_PATH, those listed in
// /etc/ld.so.conf (and the files it includes), then the standard ones.
std::vector<std::string> system_library_folders() {
    std::vector<std::string> folders;
    if (const char* path = std::getenv("LD_LIBRARY_PATH")) {
        std::istringstream in(path);
        for (std::string folder; std::getline(in, folder, ':');)
            if (!folder.empty()) folders.push_back(folder);
    }
    std::vector<std::string> configs = {"/etc/ld.so.conf"};
    for (std::size_t i = 0; i < configs.size() && i < 64; ++i) {
        std::ifstream in(configs[i]);
        for (std::string line; std::getline(in, line);) {
            line.erase(0, line.find_first_not_of(" \t"));
            if (line.empty() || line[0] == '#') continue;
            if (line.rfind("include", 0) == 0) {
                // "include /etc/ld.so.conf.d/*.conf": every .conf file of that folder.
                const std::string pattern = line.substr(line.find_first_not_of(" \t", 7));
                const std::string folder = pattern.substr(0, pattern.rfind('/'));
                if (DIR* dir = ::opendir(folder.c_str())) {
                    std::vector<std::string> found;
                    while (const dirent* entry = ::readdir(dir)) {
                        const std::string file = entry->d_name;
                        if (file.size() > 5 && file.compare(file.size() - 5, 5, ".conf") == 0)
                            found.push_back(folder + "/" + file);
                    }
                    ::closedir(dir);
                    std::sort(found.begin(), found.end());
                    configs.insert(configs.end(), found.begin(), found.end());
                }
            } else {
                folders.push_back(line.substr(0, line.find_first_of(" \t#")));
            }
        }
    }
    for (const char* standard : {"/lib", "/usr/lib", "/usr/local/lib"}) folders.push_back(standard);
    return folders;
}

// libNAME.so.N (the highest N) in `folder`: what a system without the -dev package has.
std::string versioned_library(const std::string& folder, const std::string& stem) {
    DIR* dir = ::opendir(folder.c_str());
    if (dir == nullptr) return {};
    std::string best;
    while (const dirent* entry = ::readdir(dir)) {
        const std::string file = entry->d_name;
        if (file.rfind(stem + ".", 0) == 0 && file.size() > stem.size() + 1 &&
            std::isdigit(static_cast<unsigned char>(file[stem.size() + 1])) && file > best)
            best = file;
    }
    ::closedir(dir);
    return best.empty() ? std::string() : folder + "/" + best;
}

}  // namespace

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
    const std::vector<std::string> system = system_library_folders();
    for (const std::string& folder : system)
        for (const std::string& candidate : candidates)
            if (is_regular_file(folder + "/" + candidate)) return folder + "/" + candidate;
    const std::string stem = name.rfind("lib", 0) == 0 ? name : "lib" + name;
    if (stem.find(".so") == std::string::npos)
        for (const std::string& folder : system)
            if (std::string found = versioned_library(folder, stem + ".so"); !found.empty()) return found;
    std::string tried, searched;
    for (const std::string& candidate : candidates) tried += (tried.empty() ? "" : " or ") + candidate;
    for (const std::string& folder : search) searched += (searched.empty() ? "" : ", ") + folder;
    throw std::runtime_error("#pragma cling load(\"" + name + "\"): no " + tried + " in " +
                             (searched.empty() ? std::string("the library path") : searched) +
                             " nor in the system's library folders (add one with #pragma cling add_library_path)");
}

}  // namespace mpify_kernel
