// The Gloo backend: CPU tensors over TCP, between the ranks of one machine or of several.
// Its groups come from LibTorch's own ProcessGroupGloo, on a device mpify chooses, with every
// pair's connection proven (gloo/pair_proof.hpp) and Gloo's loop nudged while the group forms
// and closes (gloo/gloo_loop_waker.hpp).
#include "common/endpoint.hpp"
#include "ddp/backends/collective_backend.hpp"
#include "ddp/backends/gloo/gloo_group.hpp"
#include "ddp/backends/gloo/gloo_release.hpp"
#include "ddp/backends/gloo/pair_proof.hpp"
#include "ddp/rendezvous.hpp"

#include <mpify/error.hpp>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

bool is_loopback(const std::string& addr) { return addr == "127.0.0.1" || addr == "localhost" || addr == "::1"; }

// The device a Gloo group of this rank listens on and connects from.
std::shared_ptr<gloo::transport::Device> gloo_device(const DdpSettings& s) {
    // Gloo listens, and tells its peers to connect, at the address its device binds.
    // GLOO_SOCKET_IFNAME chooses the interface, as in PyTorch; else a group on one machine
    // stays on loopback, and across machines each rank takes the address of its route to
    // the master, the one its peers can reach (Gloo's own default is the address the
    // host name resolves to, often 127.0.1.1 or 127.0.0.1).
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    if (ifname && *ifname) return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
    if (ranks_of_one_machine(s) || is_loopback(s.addr))
        return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
    return c10d::ProcessGroupGloo::createDeviceForHostname(local_address_toward(s.addr));
}

// A Gloo group on `device`, its loop nudged while the pairs connect (gloo_loop_waker.hpp).
c10::intrusive_ptr<C10dBackend> create_gloo_group(const c10::intrusive_ptr<c10d::Store>& store, const DdpSettings& s,
                                                  const std::shared_ptr<gloo::transport::Device>& device,
                                                  const GlooLoopWaker& waker) {
    auto options = c10d::ProcessGroupGloo::Options::create(s.timeout);
    options->devices.push_back(device);
    const GlooLoopWaker::Nudging nudging = waker.nudge();
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, s.rank, s.world_size, options);
}

// How many times a Gloo group is formed anew, on fresh ports, when a connection between
// its ranks fails or brings no proof (pair_proof.hpp), before the guard gives up.
constexpr int gloo_attempts = 3;
// How long connected ranks wait for each other's proofs. The ranks start proving
// together (all finished connecting), and 32 bytes take them milliseconds; the bound is
// what a pair held by a process that sends nothing costs, and a rank held up longer than
// this (a loaded machine) costs one more attempt, not an error.
constexpr std::chrono::milliseconds proof_patience{3000};

// "" when no rank reported trouble, else "rank 1: ...; rank 2: ...".
std::string troubles(const std::vector<std::string>& reports) {
    std::string text;
    for (std::size_t rank = 0; rank < reports.size(); ++rank)
        if (!reports[rank].empty()) text += fmt::format("{}rank {}: {}", text.empty() ? "" : "; ", rank, reports[rank]);
    return text;
}

// A Gloo group as the guard holds it: the group's loop is nudged while it closes, and an
// abandoned one keeps its store (its threads may still talk through it).
class GlooBackend final : public CollectiveBackend {
public:
    Backend kind() const override { return Backend::gloo; }
    std::string unavailable_because(const DdpSettings&) const override { return ""; }

    std::unique_ptr<FormedGroup> form(FormingContext& c) const override {
        wait_until_joined(c);
        GlooGroup gloo = form_gloo_group(c.store, c.settings, c.log, "gloo");
        return std::make_unique<FormedGroupWithGloo>(as_process_group(gloo.backend, c.store, "gloo"),
                                                     std::move(gloo.waker), c.store);
    }
};

}  // namespace

FormedGroupWithGloo::FormedGroupWithGloo(c10::intrusive_ptr<c10d::ProcessGroup> group,
                                         std::unique_ptr<GlooLoopWaker> waker,
                                         const c10::intrusive_ptr<store::Client>& store, int gpu)
    : FormedGroup(std::move(group), gpu), waker_(std::move(waker)), store_(store) {}

FormedGroupWithGloo::~FormedGroupWithGloo() {
    {
        const GlooLoopWaker::Nudging nudging = waker_->nudge();
        group_.reset();  // joins the backends' threads before the store they talk through goes
    }
    waker_.reset();  // ends the device's loop (the waker holds the device)
}

void FormedGroupWithGloo::abandon() noexcept {
    (void)group_.release();  // leaked on purpose: see FormedGroup::abandon
    (void)store_.release();
}

GlooGroup form_gloo_group(const c10::intrusive_ptr<store::Client>& store, const DdpSettings& s, const FormingLog& log,
                          const std::string& name) {
    std::string last;
    for (int attempt = 0; attempt < gloo_attempts; ++attempt) {
        const std::string phase = name + std::to_string(attempt);
        // The attempt's keys: c10d's PrefixStore puts a '/' between this and Gloo's keys.
        const std::string prefix = "mpify/" + phase;
        const std::string proof = publish_proof(*store, prefix, s.rank);
        std::unique_ptr<GlooLoopWaker> waker;  // outlives the group: declared before it
        c10::intrusive_ptr<C10dBackend> group;
        std::string trouble;
        log.reached(phase + ": proof published");
        try {
            const std::shared_ptr<gloo::transport::Device> device = gloo_device(s);
            waker = std::make_unique<GlooLoopWaker>(device);
            group = create_gloo_group(c10::make_intrusive<c10d::PrefixStore>(prefix, store), s, device, *waker);
        } catch (const std::exception& e) {
            trouble = "its connections failed: " + first_line_of(e);
            release_waiting_peers(*store, prefix, s);
        }
        log.reached(phase + ": Gloo's connections made");
        last = troubles(gather_reports(*store, s, phase + "/connected", trouble, "did not finish connecting"));
        if (!last.empty()) continue;
        log.reached(phase + ": every rank connected");
        trouble = prove_pairs(*group, *store, prefix, proof, s, std::min(s.timeout, proof_patience));
        log.reached(phase + ": pairs proven");
        last = troubles(gather_reports(*store, s, phase + "/proven", trouble, "did not prove its connections"));
        log.reached(phase + ": every rank's pairs proven");
        if (last.empty()) return GlooGroup{std::move(waker), std::move(group)};
    }
    throw Error(fmt::format(
        "mpify::DdpGuard (rank {} of {}): the group's connections failed {} times; the last time {}. Gloo takes the "
        "first connection that reaches each of its listening ports, so on a machine shared with others this is what "
        "another process connecting to those ports does (the group refuses to run with it); see mpify's "
        "docs/failure-and-security.md.",
        s.rank, s.world_size, gloo_attempts, last));
}

const CollectiveBackend& gloo_backend() {
    static const GlooBackend backend;
    return backend;
}

MPIFY_END_DETAIL_NAMESPACE
