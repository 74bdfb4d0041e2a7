#pragma once
// Forming a Gloo group whose every connection is proven to be its two ranks' own: the Gloo
// backend's groups, and the group mpify's shared-memory group forms for the calls it does
// not serve.
#include "compat/torch_compat.hpp"
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

/// Forms a Gloo group of every rank of `s` through `store`, formed again (under a prefix of
/// its own, so on new ports) when a connection fails or brings no proof (pair_proof.hpp).
/// `name` tells this group's keys in the store from those of another group formed by the
/// same guard. Throws Error after the last attempt.
GlooGroup form_gloo_group(const c10::intrusive_ptr<store::Client>& store, const DdpSettings& s, const FormingLog& log,
                          const std::string& name);

MPIFY_END_DETAIL_NAMESPACE
