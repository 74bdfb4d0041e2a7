#pragma once
// The seam between forming a group (ddp/open_group.cpp) and the backends that carry its
// collectives: mpify's shared-memory group, Gloo, NCCL. Each backend is one file in this
// folder that defines a CollectiveBackend; backend_list.cpp lists them, one line each, in
// the order the automatic choice tries them.
#include "ddp/backends/forming_log.hpp"
#include "ddp/ddp_settings.hpp"
#include "store/client.hpp"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <memory>
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// A formed group, as its backend hands it over: the c10d group that users and mpify's
/// helpers call, and whatever that group needs to stay usable and to close.
class FormedGroup {
public:
    /// `gpu`: the GPU the backend bound this rank to (NCCL), or -1.
    explicit FormedGroup(c10::intrusive_ptr<c10d::ProcessGroup> group, int gpu = -1)
        : group_(std::move(group)), gpu_(gpu) {}
    /// Closes the group: its threads are joined.
    virtual ~FormedGroup();
    FormedGroup(const FormedGroup&) = delete;
    FormedGroup& operator=(const FormedGroup&) = delete;

    const c10::intrusive_ptr<c10d::ProcessGroup>& group() const { return group_; }
    /// The GPU the backend bound this rank to, or -1 (the backend chose no device).
    int gpu() const { return gpu_; }

    /// Gives the group up after a wait in it was abandoned (an interrupt), before it is
    /// destroyed. By default the group is let go, never destroyed: its threads may be inside
    /// a collective until the backend's own timeout, and destroying it would join them.
    virtual void abandon() noexcept;

protected:
    c10::intrusive_ptr<c10d::ProcessGroup> group_;

private:
    int gpu_ = -1;
};

/// What every backend's forming is given.
struct FormingContext {
    const c10::intrusive_ptr<store::Client>& store;  ///< the group's store (connect_store)
    const DdpSettings& settings;
    const FormingLog& log;
    /// Every rank has been seen at the store already (an earlier backend's round): the
    /// backend need not wait for them to join. A backend that gives up (form returns null)
    /// sets it when its ranks agreed on that in a round every rank took part in.
    bool ranks_joined = false;
};

/// One kind of collective backend.
class CollectiveBackend {
public:
    virtual ~CollectiveBackend() = default;

    /// The value of mpify::Backend that asks for this one.
    virtual Backend kind() const = 0;
    /// "" when it can serve a group of these settings (in this build, on this machine),
    /// else why not, as a sentence without its full stop ("the NCCL backend needs ...").
    virtual std::string unavailable_because(const DdpSettings& settings) const = 0;
    /// Forms the group on every rank of it, or returns null when the ranks agreed this
    /// backend cannot serve them after all (every rank then tries the next one in the
    /// list that is available). Throws Error (a rank missing, connections failing).
    virtual std::unique_ptr<FormedGroup> form(FormingContext& context) const = 0;
};

/// Waits until every rank of the group has joined it at the store, unless an earlier
/// backend's round saw them (context.ranks_joined): where a backend's forming begins.
void wait_until_joined(const FormingContext& context);

/// Every backend, in the order the automatic choice tries them.
const std::vector<const CollectiveBackend*>& collective_backends();

/// The backend for `settings`: the one asked for, or the first the automatic choice takes.
/// Throws UsageError when the one asked for cannot serve them, saying why and what to do.
const CollectiveBackend& choose_backend(const DdpSettings& settings);

/// Every backend after `failed` in the list that is available for `settings`, in order:
/// where a group goes when `failed` returned null.
std::vector<const CollectiveBackend*> backends_after(const CollectiveBackend& failed, const DdpSettings& settings);

MPIFY_END_DETAIL_NAMESPACE
