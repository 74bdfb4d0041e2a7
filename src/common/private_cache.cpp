#include "common/private_cache.hpp"

#include <mpify/error.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE

namespace fs = std::filesystem;

fs::path user_cache_root() {
    if (const char* dir = std::getenv("MPIFY_CACHE_DIR"); dir && *dir) return dir;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "mpify";
    if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "mpify";
    return fs::temp_directory_path() / fmt::format("mpify-cache-{}", ::geteuid());
}

fs::path private_cache_folder(const fs::path& root, const std::string& name, const CacheUser& user) {
    const fs::path folder = root / name;
    fs::path partial;
    for (const fs::path& part : folder) {
        partial /= part;
        if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
            throw UsageError(fmt::format("{}: cannot create the cache folder {}: {} (set {} to a folder of your own)",
                                         user.who, partial.string(), std::strerror(errno), user.setting));
    }
    for (const fs::path& checked : {root, folder}) {
        struct stat info{};
        std::string problem;
        if (::stat(checked.c_str(), &info) != 0) problem = std::strerror(errno);
        else if (!S_ISDIR(info.st_mode)) problem = "it is not a folder";
        else if (info.st_uid != ::geteuid())
            problem = fmt::format("it belongs to user {}, not to this process's user {}", info.st_uid, ::geteuid());
        else if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0)
            problem = fmt::format("other users can write to it (mode {:o})", info.st_mode & 07777);
        if (!problem.empty())
            throw UsageError(fmt::format("{}: refusing the cache folder {}: {}; a library planted there would be "
                                         "loaded into this process (use a folder of your own: {}, or chmod go-w it)",
                                         user.who, checked.string(), problem, user.setting));
    }
    return folder;
}

bool private_regular_file(const fs::path& path) {
    struct stat info{};
    return ::lstat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && info.st_uid == ::geteuid() &&
           (info.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

MPIFY_END_DETAIL_NAMESPACE
