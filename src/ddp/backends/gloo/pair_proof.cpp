#include "ddp/backends/gloo/pair_proof.hpp"

#include "common/clock.hpp"
#include "common/random_token.hpp"
#include "ddp/rendezvous.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cstring>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

constexpr int proof_tag = 0x6d70;  // a tag of its own: the group has carried nothing else yet

std::string proof_key(const std::string& prefix, int rank) { return prefix + "/proof/" + std::to_string(rank); }

at::Tensor as_tensor(const std::string& token) {
    at::Tensor t = at::empty({static_cast<int64_t>(token.size())}, at::kByte);
    std::memcpy(t.data_ptr(), token.data(), token.size());
    return t;
}

std::string as_text(const at::Tensor& t) { return std::string(static_cast<const char*>(t.data_ptr()), t.numel()); }

}  // namespace

std::string publish_proof(store::Client& store, const std::string& prefix, int rank) {
    std::string token = random_token("the proofs of the group's connections");
    store.set(proof_key(prefix, rank), store::as_bytes(token));
    return token;
}

std::string prove_pairs(C10dBackend& group, store::Client& store, const std::string& prefix, const std::string& mine,
                        const DdpSettings& s, std::chrono::milliseconds patience) {
    const auto world = static_cast<std::size_t>(s.world_size);
    std::vector<c10::intrusive_ptr<c10d::Work>> sends(world), receives(world);
    std::vector<at::Tensor> received(world);
    const auto deadline = Clock::now() + patience;
    int peer = 0;  // the pair at hand, for the message
    try {
        for (peer = 0; peer < s.world_size; ++peer) {
            if (peer == s.rank) continue;
            std::vector<at::Tensor> out{as_tensor(mine)};
            sends[peer] = group.send(out, peer, proof_tag);
            received[peer] = at::zeros({static_cast<int64_t>(mine.size())}, at::kByte);
            std::vector<at::Tensor> in{received[peer]};
            receives[peer] = group.recv(in, peer, proof_tag);
        }
        for (peer = 0; peer < s.world_size; ++peer) {
            if (peer == s.rank) continue;
            receives[peer]->wait(milliseconds_left(deadline));
            if (as_text(received[peer]) != store::as_string(store.get(proof_key(prefix, peer))))
                return fmt::format("the connection Gloo accepted for rank {0} did not bring rank {0}'s proof: "
                                   "another process took its place",
                                   peer);
        }
        for (peer = 0; peer < s.world_size; ++peer)
            if (peer != s.rank) sends[peer]->wait(milliseconds_left(deadline));
    } catch (const std::exception& e) {
        return fmt::format("its connection with rank {} failed as the ranks proved their connections ({})", peer,
                           first_line_of(e));
    }
    return "";
}

MPIFY_END_DETAIL_NAMESPACE
