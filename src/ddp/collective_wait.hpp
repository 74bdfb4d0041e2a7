#pragma once
// Waiting for a collective of the active group, in a way an interrupt can end.
//
// The Gloo of this LibTorch never fails a send that still waits for its peer to post the
// matching receive when that peer dies: the send waits out the group's timeout (minutes),
// and so does the rank that started it. An interrupt stops every worker; the caller's
// rank must then stop waiting too (a notebook's ■ must not take five minutes), and so
// when another rank failed (a machine that fell silent breaks no connection).
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Waits for `work` and rethrows its failure. While it waits, a stop of the call this
/// thread runs a rank of (detail::call_stopping: an interrupt, another rank's failure, the
/// timeout) ends the wait: the active group is abandoned (see abandon_active_group) and
/// mpify::Error is thrown, naming `what`.
void wait_for_collective(c10d::Work& work, const char* what);

MPIFY_END_DETAIL_NAMESPACE
