#include "rank_cell.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace mpify_kernel {
namespace {

std::string folder;  // made on first use

const std::string& rank_folder() {
    if (!folder.empty()) return folder;
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/mpify-kernel-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
        throw std::runtime_error("%%mpify: cannot make a private folder " + pattern + ": " + std::strerror(errno));
    folder = pattern;
    return folder;
}

// A file name from a function's name: "ns::train" -> "ns_train".
std::string file_stem(const std::vector<std::string>& functions) {
    std::string stem = functions.empty() ? "mpify_cell" : functions.front();
    for (char& c : stem)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
    return stem.substr(0, 64);
}

std::string literal(const std::string& text) {
    std::string delimiter = "mpify";
    while (text.find(")" + delimiter + "\"") != std::string::npos) delimiter += "_";
    return "R\"" + delimiter + "(" + text + ")" + delimiter + "\"";
}

std::string list(const std::vector<std::string>& words) {
    std::string out = "{";
    for (std::size_t i = 0; i < words.size(); ++i) out += (i ? ", " : "") + literal(words[i]);
    return out + "}";
}

}  // namespace

std::string write_rank_source(const std::string& code, const std::vector<std::string>& functions) {
    const std::string path = rank_folder() + "/" + file_stem(functions) + ".cpp";
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << code << (code.empty() || code.back() != '\n' ? "\n" : "");
    out.close();
    if (!out) throw std::runtime_error("%%mpify: cannot write " + path);
    return path;
}

std::string load_source_call(const std::string& path, const std::vector<std::string>& flags,
                             const std::vector<std::string>& libraries) {
    return "::mpify::load_source(" + literal(path) + ", ::mpify::SourceOptions{" + list(flags) + ", " +
           list(libraries) + "});";
}

void remove_rank_sources() {
    if (folder.empty()) return;
    std::error_code ignored;
    std::filesystem::remove_all(folder, ignored);
    folder.clear();
}

}  // namespace mpify_kernel
