#include "learner/checkpoint_on_ranks.hpp"

#include <mpify/ddp.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <stdexcept>

MPIFY_BEGIN_NAMESPACE
namespace learner {
namespace {

enum : std::int64_t { found, missing, failed };

// The pieces rank 0 sends a file in: bounded memory on the ranks that have their own copy.
constexpr std::int64_t piece_bytes = std::int64_t(16) << 20;

// The file at `path` on this rank when it holds the bytes rank 0 checked; else nullopt.
std::optional<CheckpointBytes> same_file_here(const std::string& path, std::int64_t size, std::int64_t checksum) {
    if (checksum < 0) return std::nullopt;  // a file without a frame: nothing to compare it by
    try {
        CheckpointBytes here = CheckpointBytes::open_file(path);
        if (static_cast<std::int64_t>(here.size()) != size) return std::nullopt;
        const std::optional<std::uint32_t> its = here.payload().checksum;
        if (!its || static_cast<std::int64_t>(*its) != checksum) return std::nullopt;
        return here;
    } catch (const std::exception&) {
        return std::nullopt;  // not here, or not the same: rank 0 sends it
    }
}

// Rank 0's `file` to every rank, in pieces; the ranks that `need` it keep it, in memory.
std::optional<CheckpointBytes> sent_by_rank0(const std::string& path, const std::optional<CheckpointBytes>& file,
                                             std::int64_t size, bool need) {
    auto whole = need ? std::make_shared<at::Tensor>(torch::empty({size}, torch::kUInt8)) : nullptr;
    at::Tensor scratch = need ? at::Tensor() : torch::empty({std::min(size, piece_bytes)}, torch::kUInt8);
    for (std::int64_t at = 0; at < size; at += piece_bytes) {
        const std::int64_t n = std::min(piece_bytes, size - at);
        at::Tensor piece = need ? whole->narrow(0, at, n) : scratch.narrow(0, 0, n);
        if (file) {
            char* into = reinterpret_cast<char*>(piece.data_ptr<std::uint8_t>());
            const std::size_t got = file->read_at(static_cast<std::uint64_t>(at), into, static_cast<std::size_t>(n));
            // The file shrank since rank 0 checked it: the receivers' checksum finds the gap.
            std::fill(into + got, into + n, '\0');
        }
        mpify::ddp::broadcast(piece, 0);
    }
    if (!need) return file;
    const char* data = reinterpret_cast<const char*>(whole->data_ptr<std::uint8_t>());
    return CheckpointBytes::in_memory(path, whole, data, static_cast<std::uint64_t>(size));
}

}  // namespace

std::optional<CheckpointBytes> open_on_every_rank(const std::string& path, bool missing_is_none, int rank,
                                                  bool in_group) {
    std::int64_t state = found, size = 0, checksum = -1;
    std::optional<CheckpointBytes> bytes;
    std::string error;
    if (rank == 0) {
        if (missing_is_none && !std::filesystem::exists(path)) {
            state = missing;
        } else {
            try {
                bytes = CheckpointBytes::open_file(path);
                const PayloadSpan& payload = bytes->payload();  // checked before any rank relies on it
                size = static_cast<std::int64_t>(bytes->size());
                if (payload.checksum) checksum = *payload.checksum;
            } catch (const std::exception& e) {
                state = failed;
                error = e.what();
                bytes.reset();
            }
        }
    }
    if (in_group) {  // every rank learns what rank 0 found
        at::Tensor head = torch::tensor({state, size, checksum}, torch::kLong);
        mpify::ddp::broadcast(head, 0);
        state = head[0].item<std::int64_t>();
        size = head[1].item<std::int64_t>();
        checksum = head[2].item<std::int64_t>();
    }
    if (state == missing) return std::nullopt;
    if (state == failed) throw std::runtime_error(rank == 0 ? error : "rank 0 could not read " + path);
    if (!in_group) return bytes;
    if (rank != 0) bytes = same_file_here(path, size, checksum);
    const bool need = !bytes;
    at::Tensor needing = torch::tensor({static_cast<std::int64_t>(need)}, torch::kLong);
    mpify::ddp::all_reduce(needing);
    if (needing.item<std::int64_t>() == 0) return bytes;
    return sent_by_rank0(path, bytes, size, need);
}

}  // namespace learner
MPIFY_END_NAMESPACE
