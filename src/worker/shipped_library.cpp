#include "worker/shipped_library.hpp"

#include "common/content_hash.hpp"
#include "common/posix.hpp"
#include "common/private_cache.hpp"
#include "common/unique_fd.hpp"
#include "worker/remembered_hash.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>
#include <system_error>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

namespace fs = std::filesystem;

// True when `path` is a regular file with the offered size and hash. A copy in the
// shipped cache (`own_copy`) must also be this user's, writable by nobody else, and no
// symbolic link: it is about to be loaded.
bool holds_offered_bytes(const std::string& path, const LibraryOffer& offer, bool own_copy) {
    if (own_copy && !private_regular_file(path)) return false;
    struct stat info{};
    if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) ||
        static_cast<std::uint64_t>(info.st_size) != offer.size)
        return false;
    try {
        return remembered_content_hash(path) == offer.hash;
    } catch (const std::system_error&) {
        return false;  // unreadable here: as good as absent
    }
}

// A library arriving into the cache folder: a file without a name until it is whole and
// checked, so an agent killed midway leaves nothing behind. Where the filesystem has no
// unnamed files (NFS homes), a temporary name that the destructor removes.
class IncomingCopy {
public:
    explicit IncomingCopy(const fs::path& folder) {
        file_.reset(::open(folder.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0700));
        if (!file_ && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
            std::string name = (folder / ".incoming-XXXXXX").string();
            file_.reset(::mkostemp(name.data(), O_CLOEXEC));
            if (file_) temporary_name_ = name;
        }
        if (!file_)
            throw std::system_error(errno, std::generic_category(), "cannot create a file in " + folder.string());
    }
    ~IncomingCopy() {
        if (!temporary_name_.empty()) ::unlink(temporary_name_.c_str());
    }
    IncomingCopy(const IncomingCopy&) = delete;
    IncomingCopy& operator=(const IncomingCopy&) = delete;

    void write(std::string_view bytes) {
        write_all(file_.get(), bytes.data(), bytes.size(), "writing a shipped library");
    }

    // Gives the copy the name `name`, never replacing a file there; false when `name` is
    // taken (another agent of the call placed it first).
    bool place_as(const fs::path& name) {
        if (::fchmod(file_.get(), 0500) != 0)
            throw std::system_error(errno, std::generic_category(), "making a shipped library read-only");
        const int linked = temporary_name_.empty()
                               ? ::linkat(AT_FDCWD, fmt::format("/proc/self/fd/{}", file_.get()).c_str(), AT_FDCWD,
                                          name.c_str(), AT_SYMLINK_FOLLOW)
                               : ::link(temporary_name_.c_str(), name.c_str());
        if (linked == 0) return true;
        if (errno == EEXIST) return false;
        throw std::system_error(errno, std::generic_category(), "naming the shipped library " + name.string());
    }

private:
    UniqueFd file_;
    std::string temporary_name_;
};

// Receives the offered bytes into the cache as `copy`.
void receive_copy(int link, const LibraryOffer& offer, const fs::path& folder, const fs::path& copy,
                  Clock::duration patience) {
    send_link_message(link, LinkType::library_wanted, {});
    IncomingCopy incoming(folder);
    ContentHash hash;
    std::uint64_t received = 0;
    while (received < offer.size) {
        const LinkMessage piece = receive_link_message(link, Clock::now() + patience, "the library's bytes");
        if (piece.type != LinkType::library_bytes)
            throw std::runtime_error(fmt::format("the caller sent a message of type {} amid the bytes of {}",
                                                 static_cast<int>(piece.type), offer.path));
        if (piece.payload.size() > offer.size - received)
            throw std::runtime_error(fmt::format("the caller sent more than the {} bytes of {} it offered", offer.size,
                                                 offer.path));
        incoming.write(piece.payload);
        hash.add(piece.payload);
        received += piece.payload.size();
    }
    if (hash.finish() != offer.hash)
        throw std::runtime_error(fmt::format("the bytes of {} that arrived do not have the hash offered (did the file "
                                             "change while it was sent?)",
                                             offer.path));
    if (incoming.place_as(copy) || holds_offered_bytes(copy, offer, true)) return;
    ::unlink(copy.c_str());  // a damaged copy under the name: this one replaces it
    if (!incoming.place_as(copy))
        throw std::runtime_error(fmt::format("{} is taken by a file that is not the library", copy.string()));
}

LibraryHere place(int link, const LibraryOffer& offer, Clock::duration patience) {
    if (holds_offered_bytes(offer.path, offer, false)) return {LibraryHere::at_its_path, offer.path};
    if (offer.size > most_shipped_library_bytes)
        throw std::runtime_error(fmt::format("{} is not here and is {} bytes, more than an agent takes ({})",
                                             offer.path, offer.size, most_shipped_library_bytes));
    const fs::path folder = private_cache_folder(user_cache_root(), "shipped",
                                                 {"mpify agent", "MPIFY_CACHE_DIR for the agent on its machine"});
    const fs::path copy = folder / (hex_digits(offer.hash) + ".so");
    if (holds_offered_bytes(copy, offer, true)) return {LibraryHere::in_cache, copy.string()};
    receive_copy(link, offer, folder, copy, patience);
    return {LibraryHere::shipped, copy.string()};
}

}  // namespace

std::string answer_library_offer(int link, const LibraryOffer& offer, Clock::duration patience) {
    try {
        const LibraryHere here = place(link, offer, patience);
        send_link_message(link, LinkType::library_here, encode_here(here));
        return here.path;
    } catch (const std::exception& e) {
        try {
            send_link_message(link, LinkType::refused, e.what());  // the caller names this host itself
        } catch (const std::exception&) {
            // the caller is gone: the agent's end says why
        }
        throw std::runtime_error(fmt::format("on {}: {}", this_host_name(), e.what()));
    }
}

MPIFY_END_DETAIL_NAMESPACE
