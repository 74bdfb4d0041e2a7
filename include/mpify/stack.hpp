#pragma once
// Where a rank is: the stack of each of its threads, read from outside the process
// (mpify-stacks, with elfutils' libdw) when a call times out, is interrupted, or loses
// a rank while others still run, and on request with mpify::where().
#include <mpify/abi.hpp>
#include <mpify/export.hpp>

#include <cstdint>
#include <string>
#include <vector>

MPIFY_BEGIN_NAMESPACE

/// One frame of a thread's stack, innermost first.
struct MPIFY_API StackFrame {
    std::uint64_t address = 0;  ///< the program counter (a return address for outer frames)
    std::string function;       ///< demangled; empty when no symbol covers the address
    std::string file;           ///< source file, when the object has line tables (-g, -g1)
    int line = 0;               ///< line in `file`; 0 when unknown
    std::string module;         ///< the program or shared library that holds the code
};

/// The stack of one thread.
struct MPIFY_API ThreadStack {
    int tid = 0;                     ///< the thread's id (as in /proc/PID/task)
    std::string name;                ///< its name (/proc/PID/task/TID/comm)
    std::vector<StackFrame> frames;  ///< innermost first
};

/// One collective call of a rank, from mpify's record of its process group's calls (the
/// flight recorder: the last 64 each rank entered, kept in its memory and read with its
/// stack). Calls made through mpify (its ddp helpers, DistributedDataParallel,
/// SyncBatchNorm...) are recorded; calls made on the c10d group directly are not.
struct MPIFY_API CollectiveCall {
    std::uint64_t sequence = 0;  ///< 1 for the group's first call, counted on each rank
    std::string operation;       ///< "allreduce", "broadcast", "allgather", "barrier"
    std::string dtype;           ///< the tensor's ("Float"...); empty for a barrier
    std::int64_t elements = 0;   ///< of this rank's tensor
    std::uint64_t bytes = 0;     ///< of this rank's tensor
    std::string detail;          ///< the reduction ("SUM"), the root ("from rank 0")...
    std::string site;            ///< who called: "mpify::ddp::all_reduce", ...
    int bucket = -1;             ///< DistributedDataParallel's gradient bucket; -1 for other calls
    double started_seconds_ago = 0;  ///< when the rank entered it, before the record was read
    bool ended = false;              ///< the rank's wait for it ended (done or failed)
    double ended_seconds_ago = 0;    ///< with `ended`

    /// "allreduce #812 (mpify::DistributedDataParallel bucket 2: Float x 300000, 1.1 MiB, SUM)".
    std::string describe() const;
    /// Whether `other` is the same call: operation, dtype, elements and detail.
    bool same_call_as(const CollectiveCall& other) const;
};

/// Where one rank was when its stack was read.
struct MPIFY_API RankStack {
    int rank = -1;     ///< global rank within the call
    std::string host;  ///< the machine, when another than the caller's; else empty
    /// Its threads. The one that runs the rank's function comes first: a worker's main
    /// thread, or, for the caller's own rank, the thread that called ranch.
    std::vector<ThreadStack> threads;
    /// Why the stack could not be read (permission, the deadline, mpify-stacks not
    /// installed, ...); empty when `threads` holds it all. With `threads`: what of them is
    /// missing (unwinding stopped at the deadline: later threads have no frames).
    std::string unavailable;
    /// Its group's last collective calls, oldest first; empty when it had no group open
    /// (or its stack was not read).
    std::vector<CollectiveCall> collectives;
    /// Why its record of collective calls was left out of `collectives`: the record lies
    /// in the rank's memory, and what was read there is not what mpify writes (a number
    /// out of range, a time not yet come). Empty otherwise.
    std::string collectives_ignored;

    /// Every thread, a frame per line: "#3 train_step at cnn.hpp:41 (libmodel.so)". The
    /// names come from the rank's files, with their control characters written out, as
    /// in summary() and line_up_collectives().
    std::string describe() const;
    /// One line: the innermost frames of the rank's own thread that are in user code
    /// (neither the C or C++ runtime, LibTorch, nor mpify), innermost first:
    /// "spin at work.cpp:12 <- train_step at cnn.hpp:41"; `unavailable` when unread.
    std::string summary() const;
};

/// The ranks' records lined up, a line per rank, for a report: which collective each one
/// waits in and since when, which ranks never entered the latest one and what was their
/// last, calls that differ between ranks at the same sequence number, and records left
/// out as not plausible. Empty when no rank has a record.
MPIFY_API std::string line_up_collectives(const std::vector<RankStack>& ranks);

/// Where every rank of the calls running in this process is now (the caller's own rank
/// included), by rank; empty when no call runs. For a watchdog or a signal-handling
/// thread: the thread that called ranch is busy in it. Reads each rank as
/// Options::stacks does, within 2 s in all; the ranks go on as they were.
MPIFY_API std::vector<RankStack> where();

MPIFY_END_NAMESPACE
