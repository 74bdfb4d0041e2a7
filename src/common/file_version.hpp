#pragma once
// A version of a file as stat tells it: a file rewritten in place, renamed over, or
// touched differs in one of these. The change time is set by the kernel on every write
// and can be set back by no one, so a file rewritten with its modification time put
// back still reads as another version.
#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <tuple>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct FileVersion {
    std::uint64_t device = 0, inode = 0, size = 0;
    std::int64_t modified_s = 0, modified_ns = 0, changed_s = 0, changed_ns = 0;

    static FileVersion of(const struct stat& info) {
        return {static_cast<std::uint64_t>(info.st_dev),
                static_cast<std::uint64_t>(info.st_ino),
                static_cast<std::uint64_t>(info.st_size),
                info.st_mtim.tv_sec,
                info.st_mtim.tv_nsec,
                info.st_ctim.tv_sec,
                info.st_ctim.tv_nsec};
    }
    bool operator==(const FileVersion& other) const {
        return std::tie(device, inode, size, modified_s, modified_ns, changed_s, changed_ns) ==
               std::tie(other.device, other.inode, other.size, other.modified_s, other.modified_ns, other.changed_s,
                        other.changed_ns);
    }
    bool operator!=(const FileVersion& other) const { return !(*this == other); }
};

MPIFY_END_DETAIL_NAMESPACE
