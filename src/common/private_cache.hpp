#pragma once
// This user's mpify cache: folders that hold code a process will load (load_source's
// compiled libraries, the libraries a caller shipped to this machine), so only this user
// may be able to put files there.
#include <filesystem>
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// The cache's root: $MPIFY_CACHE_DIR, else $XDG_CACHE_HOME/mpify, else ~/.cache/mpify,
/// else /tmp/mpify-cache-<uid> (a shared folder: the name is this user's, and
/// private_cache_folder refuses one that someone else made first).
std::filesystem::path user_cache_root();

/// Who asks for a cache folder, for its errors: `who` begins them ("mpify::load_source"),
/// `setting` says how to choose another folder ("SourceOptions::cache_dir or MPIFY_CACHE_DIR").
struct CacheUser {
    std::string who;
    std::string setting;
};

/// Creates what is missing of `root`/`name` with mode 0700, then checks that `root` and
/// the folder are directories owned by this user that nobody else can write. Returns the
/// folder; throws UsageError naming the folder, what is wrong and `user`'s remedy.
std::filesystem::path private_cache_folder(const std::filesystem::path& root, const std::string& name,
                                           const CacheUser& user);

/// True when `path` is a regular file, not a symbolic link, of this user's that nobody else
/// can write: a file of such a folder fit to be loaded.
bool private_regular_file(const std::filesystem::path& path);

MPIFY_END_DETAIL_NAMESPACE
