#pragma once
// Forming a Gloo group whose every connection is proven to be its two ranks' own: the Gloo
// backend's groups, and the group mpify's shared-memory group forms for the calls it does
// not serve.
#include "compat/torch_compat.hpp"
#include "ddp/backends/collective_backend.hpp"
#include "ddp/backends/forming_log.hpp"
#include "ddp/backends/gloo/gloo_loop_waker.hpp"
#include "ddp/ddp_settings.hpp"
#include "store/client.hpp"

#include <memory>
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// A formed Gloo group and the waker of its device's loop, which must outlive it.
struct GlooGroup {
    std::unique_ptr<GlooLoopWaker> waker;
    c10::intrusive_ptr<C10dBackend> backend;
};

/// A formed group whose process group holds a Gloo backend (the Gloo backend's, and NCCL's
/// for CPU tensors), as the guard holds it: the Gloo loop is nudged while the group closes
/// (its threads joined before the store they talk through goes), and an abandoned group
/// keeps its store.
class FormedGroupWithGloo final : public FormedGroup {
public:
    /// `group` (whose Gloo backend's loop `waker` wakes) over `store`; `gpu` as FormedGroup's.
    FormedGroupWithGloo(c10::intrusive_ptr<c10d::ProcessGroup> group, std::unique_ptr<GlooLoopWaker> waker,
                        const c10::intrusive_ptr<store::Client>& store, int gpu = -1);
    ~FormedGroupWithGloo() override;
    void abandon() noexcept override;

private:
    std::unique_ptr<GlooLoopWaker> waker_;  // reset after the group, by the destructor
    c10::intrusive_ptr<store::Client> store_;
};

/// Forms a Gloo group of every rank of `s` through `store`, formed again (under a prefix of
/// its own, so on new ports) when a connection fails or brings no proof (pair_proof.hpp).
/// `name` tells this group's keys in the store from those of another group formed by the
/// same guard. Throws Error after the last attempt.
GlooGroup form_gloo_group(const c10::intrusive_ptr<store::Client>& store, const DdpSettings& s, const FormingLog& log,
                          const std::string& name);

MPIFY_END_DETAIL_NAMESPACE
