#pragma once
// Entering a collective of the active group into this rank's record, and waiting for it
// in a way an interrupt can end and a mismatch between ranks is found in.
//
// The Gloo of this LibTorch never fails a send that still waits for its peer to post the
// matching receive when that peer dies: the send waits out the group's timeout (minutes),
// and so does the rank that started it. An interrupt stops every worker; the caller's
// rank must then stop waiting too (a notebook's ■ must not take five minutes), and so
// when another rank failed (a machine that fell silent breaks no connection).
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Enters a collective about to be started on `tensor` (null: a barrier) into this rank's
/// record (forensics/collective_record.hpp): its sequence number, for wait_for_collective.
/// `detail`: the reduction or the root; `site`: who calls (a static string).
std::uint64_t record_collective(const char* operation, const at::Tensor* tensor, const std::string& detail,
                                const char* site, int bucket = -1);

/// "SUM", "AVG", ... for the record.
std::string reduction_name(const c10d::ReduceOp& op);

/// Waits for `work` (the recorded call `sequence`, 0: not recorded) and rethrows its
/// failure. While it waits, a stop of the call this thread runs a rank of
/// (detail::call_stopping: an interrupt, another rank's failure, the timeout) ends the
/// wait: the active group is abandoned (see abandon_active_group) and mpify::Error is
/// thrown, naming `what`. A wait that lasts, or fails, looks for a peer in a different
/// call at the same sequence (call_agreement.hpp): mpify::Error naming both, at once.
void wait_for_collective(c10d::Work& work, const char* what, std::uint64_t sequence = 0);

/// Starts a collective with `start` (a call of the active group's, such as allreduce) and
/// waits for it as wait_for_collective does. The backend may run it on this thread, inside
/// `start` (see ddp/backends/waiting_caller.hpp): its wait ends the same ways.
void run_collective(const char* what, std::uint64_t sequence,
                    const std::function<c10::intrusive_ptr<c10d::Work>()>& start);

/// Why the call this thread runs a rank of is stopping (detail::call_stopping() holds), as
/// an error message says it: interrupted, or its ranks stopped.
const char* why_the_call_stops() noexcept;

/// The same for the future a communication hook returned (its collectives are recorded
/// by the hook's ddp::all_reduce_async): an interrupt or a stop of the call ends the wait;
/// the future's error is rethrown.
void wait_for_future(c10::ivalue::Future& future, const char* what);

MPIFY_END_DETAIL_NAMESPACE
