#pragma once
// Gloo writes to its peers' sockets without MSG_NOSIGNAL: when a peer has died, a write
// raises SIGPIPE, whose default action kills the whole process (in a notebook, the
// kernel) instead of letting the collective fail with an error. While a group is open,
// SIGPIPE is blocked in the thread that opened it, and so in every thread Gloo starts
// from there (a new thread inherits its creator's mask): a write to a dead peer then
// fails with EPIPE, which Gloo reports as an exception.

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

class SigpipeBlock {
public:
    /// Blocks SIGPIPE in the calling thread.
    SigpipeBlock();
    /// In the same thread, after the threads that inherited the block have ended: discards
    /// a SIGPIPE that is pending for this thread and restores its mask.
    ~SigpipeBlock();
    SigpipeBlock(const SigpipeBlock&) = delete;
    SigpipeBlock& operator=(const SigpipeBlock&) = delete;

private:
    bool was_blocked_ = false;
};

MPIFY_END_DETAIL_NAMESPACE
