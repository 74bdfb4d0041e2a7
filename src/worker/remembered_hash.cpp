#include "worker/remembered_hash.hpp"

#include "common/content_hash.hpp"
#include "common/file_version.hpp"
#include "common/private_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <system_error>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

namespace fs = std::filesystem;

struct stat stat_of(const std::string& path) {
    struct stat info{};
    if (::stat(path.c_str(), &info) != 0)
        throw std::system_error(errno, std::generic_category(), "cannot read " + path);
    return info;
}

// One line: the version's seven numbers, then the hash in hex digits.
std::string record_of(const FileVersion& v, const std::string& hash) {
    return fmt::format("{} {} {} {} {} {} {} {}\n", v.device, v.inode, v.size, v.modified_s, v.modified_ns, v.changed_s,
                       v.changed_ns, hex_digits(hash));
}

// The record's file for `path`: named by the path's hash, so any path makes a plain name.
fs::path record_file(const std::string& path) {
    ContentHash name;
    name.add(path);
    const fs::path folder = private_cache_folder(user_cache_root(), "hashes",
                                                 {"mpify agent", "MPIFY_CACHE_DIR for the agent on its machine"});
    return folder / hex_digits(name.finish());
}

std::string remembered(const fs::path& record, const FileVersion& now) {
    if (!private_regular_file(record)) return {};
    std::ifstream in(record);
    FileVersion then;
    std::string hex;
    if (!(in >> then.device >> then.inode >> then.size >> then.modified_s >> then.modified_ns >> then.changed_s >>
          then.changed_ns >> hex) ||
        then != now || hex.size() != 2 * ContentHash::size)
        return {};
    std::string hash(ContentHash::size, '\0');
    for (std::size_t i = 0; i < hash.size(); ++i) {
        unsigned byte = 0;
        if (std::sscanf(hex.c_str() + 2 * i, "%2x", &byte) != 1) return {};
        hash[i] = static_cast<char>(byte);
    }
    return hash;
}

// Written whole under another name, then renamed over: a reader sees the old record or
// the new one, never half of one.
void remember(const fs::path& record, const std::string& text) {
    const fs::path incoming = record.string() + fmt::format(".{}", ::getpid());
    {
        std::ofstream out(incoming, std::ios::trunc);
        out << text;
        if (!out.flush()) return;
    }
    fs::permissions(incoming, fs::perms::owner_read | fs::perms::owner_write);
    std::error_code ignored;
    fs::rename(incoming, record, ignored);
    if (ignored) fs::remove(incoming, ignored);
}

}  // namespace

std::string remembered_content_hash(const std::string& path) {
    const FileVersion before = FileVersion::of(stat_of(path));
    fs::path record;
    try {
        record = record_file(path);
        if (std::string hash = remembered(record, before); !hash.empty()) return hash;
    } catch (const std::exception&) {
        record.clear();  // no usable cache here: hash every time
    }
    std::string hash = content_hash_of_file(path);
    // Hashed while it changed: the hash is of no one version, and not remembered.
    if (!record.empty() && FileVersion::of(stat_of(path)) == before) {
        try {
            remember(record, record_of(before, hash));
        } catch (const std::exception&) {
        }
    }
    return hash;
}

MPIFY_END_DETAIL_NAMESPACE
