#include "spawn/library_shipping.hpp"

#include "common/content_hash.hpp"
#include "common/file_version.hpp"
#include "common/posix.hpp"
#include "common/unique_fd.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <stdexcept>
#include <system_error>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

struct KnownOffer {
    FileVersion version;
    LibraryOffer offer;
};

std::mutex known_offers_lock;
std::map<std::string, KnownOffer>& known_offers() {
    static auto* offers = new std::map<std::string, KnownOffer>;  // never destroyed: calls may outlive statics
    return *offers;
}

struct stat stat_of(const std::string& path) {
    struct stat info{};
    if (::stat(path.c_str(), &info) != 0)
        throw std::system_error(errno, std::generic_category(), "mpify: cannot read " + path);
    return info;
}

// Sends the library's bytes as library_bytes messages; returns how many.
std::uint64_t send_library_bytes(int link, const LibraryOffer& offer, Clock::time_point deadline) {
    const UniqueFd file(::open(offer.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!file) throw std::system_error(errno, std::generic_category(), "cannot read " + offer.path);
    std::string piece(max_link_payload, '\0');
    std::uint64_t sent = 0;
    while (sent < offer.size) {
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(piece.size(), offer.size - sent));
        const ReadResult got = read_some(file.get(), piece.data(), want);
        if (got.kind == ReadResult::error)
            throw std::system_error(got.error_number, std::generic_category(), "cannot read " + offer.path);
        if (got.kind != ReadResult::bytes)
            throw std::runtime_error(fmt::format("{} became shorter than the {} bytes offered while it was sent",
                                                 offer.path, offer.size));
        send_link_message_until(link, LinkType::library_bytes, std::string_view(piece.data(), got.size), deadline,
                                "the library's bytes");
        sent += got.size;
    }
    return sent;
}

}  // namespace

LibraryOffer offer_library(const std::string& path) {
    const FileVersion version = FileVersion::of(stat_of(path));
    {
        const std::lock_guard<std::mutex> hold(known_offers_lock);
        const auto known = known_offers().find(path);
        if (known != known_offers().end() && known->second.version == version) return known->second.offer;
    }
    LibraryOffer offer{path, version.size, content_hash_of_file(path)};
    // Hashed while it changed: offered as it is now, and not remembered.
    if (FileVersion::of(stat_of(path)) != version) return offer;
    const std::lock_guard<std::mutex> hold(known_offers_lock);
    known_offers()[path] = {version, offer};
    return offer;
}

LibraryDelivery deliver_library(int link, const LibraryOffer& offer, Clock::time_point deadline) {
    send_link_message_until(link, LinkType::library, encode_offer(offer), deadline, "a library's offer");
    LinkMessage answer = receive_link_message(link, deadline, "where the library is on the rank's machine");
    LibraryDelivery delivery;
    if (answer.type == LinkType::library_wanted) {
        try {
            delivery.bytes_sent = send_library_bytes(link, offer, deadline);
        } catch (const std::exception&) {
            // An agent that gave up midway (its disk full) said why before it closed.
            const LinkMessage last = receive_link_message(
                link, std::min(deadline, Clock::now() + std::chrono::seconds(1)), "the agent's refusal");
            if (last.type == LinkType::refused) throw std::runtime_error(last.payload);
            throw;
        }
        answer = receive_link_message(link, deadline, "the rank's machine to store the library");
    }
    if (answer.type == LinkType::refused) throw std::runtime_error(answer.payload);
    if (answer.type != LinkType::library_here)
        throw std::runtime_error(fmt::format("its agent answered a library's offer with a message of type {}",
                                             static_cast<int>(answer.type)));
    delivery.here = decode_here(answer.payload);
    return delivery;
}

MPIFY_END_DETAIL_NAMESPACE
