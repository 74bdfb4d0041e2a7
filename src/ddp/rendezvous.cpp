#include "ddp/rendezvous.hpp"

#include "ddp/store.hpp"

#include <mpify/error.hpp>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace mpify::detail {
namespace {

// The ranks among `from`..world_size-1 that have not set `phase`/<rank>, asked over a
// new connection. The waiting one cannot be trusted after its wait timed out: the store
// still owes it a "stop waiting" byte for the key it gave up on, and when that key comes
// late, the byte is read as the answer to the next question (it is 0, as is "ready").
std::string missing_ranks(const DdpSettings& s, const std::string& phase, int from) {
    try {
        auto probe = connect_store(s, false);
        std::string missing;
        for (int rank = from; rank < s.world_size; ++rank)
            if (!probe->check({phase + "/" + std::to_string(rank)}))
                missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
        return missing;
    } catch (const std::exception& e) {
        return fmt::format("among {}..{} (the store could not say which: {})", from, s.world_size - 1, e.what());
    }
}

}  // namespace

c10::intrusive_ptr<c10d::Store> connect_store(const DdpSettings& s, bool server) {
    return c10::make_intrusive<c10d::PrefixStore>("mpify", open_store(s.addr, s.port, s.timeout, server));
}

void wait_for_all(c10d::Store& store, const DdpSettings& s, const std::string& phase, const char* failure) {
    store.set(phase + "/" + std::to_string(s.rank), std::vector<uint8_t>{1});
    const auto deadline = std::chrono::steady_clock::now() + s.timeout;
    for (int rank = 0; rank < s.world_size; ++rank) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        try {
            store.wait({phase + "/" + std::to_string(rank)}, std::max(left, std::chrono::milliseconds(1)));
        } catch (const std::exception&) {
            throw Error(fmt::format(
                "mpify::DdpGuard (rank {} of {}): rank(s) {} {} at {}:{} within {} ms. "
                "Did every process start, with the same world_size, addr and port?",
                s.rank, s.world_size, missing_ranks(s, phase, rank), failure, s.addr, s.port, s.timeout.count()));
        }
    }
}

}  // namespace mpify::detail
