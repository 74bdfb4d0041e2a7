// The collective backends, and choosing one. Adding a backend: a file in this folder that
// defines a CollectiveBackend and a function returning it, declared and listed here.
#include "ddp/backends/collective_backend.hpp"

#include "ddp/rendezvous.hpp"

#include <mpify/error.hpp>

#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE

const CollectiveBackend& nccl_backend();           // nccl_backend.cpp
const CollectiveBackend& shared_memory_backend();  // shared_memory_backend.cpp
const CollectiveBackend& gloo_backend();           // gloo_backend.cpp

FormedGroup::~FormedGroup() { group_.reset(); }

void FormedGroup::abandon() noexcept { (void)group_.release(); }

void wait_until_joined(const FormingContext& context) {
    if (context.ranks_joined) return;
    wait_for_all(*context.store, context.settings, "joined", "did not join the group");
    context.log.reached("every rank joined");
}

const std::vector<const CollectiveBackend*>& collective_backends() {
    // The automatic choice's order: GPUs when every rank has one, memory shared by the
    // ranks of one machine, then TCP.
    static const std::vector<const CollectiveBackend*> backends{&nccl_backend(), &shared_memory_backend(),
                                                                &gloo_backend()};
    return backends;
}

const CollectiveBackend& choose_backend(const DdpSettings& s) {
    if (s.backend == Backend::automatic) {
        for (const CollectiveBackend* backend : collective_backends())
            if (backend->unavailable_because(s).empty()) return *backend;
        throw UsageError("mpify::DdpGuard: no collective backend of this build can serve this group");
    }
    const CollectiveBackend* chosen = nullptr;
    for (const CollectiveBackend* backend : collective_backends())
        if (backend->kind() == s.backend) chosen = backend;
    if (chosen == nullptr)
        throw UsageError(fmt::format("mpify::DdpGuard: no backend number {} is in this build",
                                     static_cast<int>(s.backend)));
    const std::string why_not = chosen->unavailable_because(s);
    if (!why_not.empty())
        throw UsageError(fmt::format("mpify::DdpGuard: {}. Use Backend::gloo (or automatic).", why_not));
    return *chosen;
}

std::vector<const CollectiveBackend*> backends_after(const CollectiveBackend& failed, const DdpSettings& s) {
    std::vector<const CollectiveBackend*> after;
    bool past = false;
    for (const CollectiveBackend* backend : collective_backends()) {
        if (past && backend->unavailable_because(s).empty()) after.push_back(backend);
        past = past || backend == &failed;
    }
    return after;
}

MPIFY_END_DETAIL_NAMESPACE
