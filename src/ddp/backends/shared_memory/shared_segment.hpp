#pragma once
// The memory the ranks of a one-machine group share, and the barrier they meet at in it.
//
// One process makes a memfd (rank 0 as the group forms, or in_ddp's caller before it
// starts the ranks); every rank opens it through /proc/<that pid>/fd/<fd> (the same user
// may; nothing is named in a folder anyone else can write, nothing listens) and checks
// that it found that very file (device, inode, owner, size). The file holds a header (the
// barrier's counters, what each rank is calling, which rank failed, the ranks' pids) and
// world + 1 slots: one per rank and one for results.
//
// A rank waits at the barrier spinning a moment (longer where every rank has a core), then
// on a futex, waking every 20 ms to look at its peers: a
// peer that ended (its pidfd became readable), a peer that gave up (it marked the
// segment failed), or the collective's deadline ends the wait with an Error that says
// which. Once failed, the segment stays failed: every later collective fails at once.
#include "common/clock.hpp"
#include "common/unique_fd.hpp"
#include "ddp/backends/waiting_caller.hpp"

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// What one rank is calling, so that ranks calling different collectives (or the same
/// one on different sizes or types) are told so instead of mixing each other's bytes.
struct SegmentCall {
    std::uint32_t kind = 0;  ///< which collective (SharedMemoryGroup numbers them)
    std::int32_t dtype = 0;  ///< c10::ScalarType
    std::uint64_t bytes = 0;
    std::int32_t root = 0;   ///< broadcast's root
    std::int32_t reduce = 0; ///< allreduce's c10d::ReduceOp
    bool operator==(const SegmentCall& o) const {
        return kind == o.kind && dtype == o.dtype && bytes == o.bytes && root == o.root && reduce == o.reduce;
    }
};

class SharedSegment {
public:
    /// The most ranks a segment serves (a group on one machine).
    static constexpr int most_ranks = 256;

    /// A new segment for `world` ranks with slots of `slot_bytes`, whose maker is rank 0.
    static SharedSegment create(int world, std::size_t slot_bytes);
    /// Opens the segment `locator` (create()'s locator()) describes, as `rank`. Throws
    /// Error saying why when it is not there or not the file its maker made.
    static SharedSegment open(const std::string& locator, int world, int rank);

    SharedSegment(SharedSegment&& other) noexcept;
    SharedSegment& operator=(SharedSegment&&) = delete;
    SharedSegment(const SharedSegment&) = delete;
    ~SharedSegment();

    /// "pid fd device inode size slot": where the ranks find this segment (its maker's).
    std::string locator() const;
    /// The maker keeps its descriptor until every rank has opened the file; then it may
    /// close it.
    void close_descriptor() noexcept { descriptor_.reset(); }

    /// The ranks' first meeting, in a segment made before they started: records this
    /// rank's pid, waits until every rank has arrived, watches the peers (watch_peers) and
    /// returns every rank's pid, by rank. While it waits it looks, every 20 ms, at the
    /// peers that have arrived (one that ended fails the meeting, named) and asks
    /// `give_up`, which may throw to end the wait (an interrupt) or return true when the
    /// ranks are to meet elsewhere (one could not open the segment): join then returns an
    /// empty vector and the segment is left unused. At `deadline` it throws Error naming
    /// the ranks that have not arrived.
    std::vector<pid_t> join(Clock::time_point deadline, const std::function<bool()>& give_up);

    /// Watches `pids` (by rank; this rank's own entry is skipped) so that a wait notices a
    /// peer that ended. A pid that is already gone counts as ended: a wait for it fails
    /// (a barrier that every rank passed does not wait, so a rank that finished early and
    /// exited is no error).
    void watch_peers(const std::vector<pid_t>& pids);

    /// Waits until every rank has reached this barrier as often as this one. Throws Error
    /// (saying `what` was under way) when a peer ended or failed, or at `deadline`. A
    /// `caller` waiting on this thread is asked at each look at the peers whether to go
    /// on (WaitingCaller::while_waiting throws when not).
    void barrier(Clock::time_point deadline, const std::string& what, const WaitingCaller* caller = nullptr);
    /// Marks the segment failed by this rank and wakes every waiting peer. Idempotent.
    void fail() noexcept;
    /// Throws Error when a rank has failed the segment.
    void check_not_failed(const std::string& what) const;

    int rank() const noexcept { return rank_; }
    int world() const noexcept { return world_; }
    std::size_t slot_bytes() const noexcept { return slot_bytes_; }
    /// Slot `k` (0 .. world - 1: each rank's; world: the results').
    std::byte* slot(int k) const noexcept;
    /// The call of `rank` for the collective numbered `sequence` (two are kept: a rank
    /// may write its next while a slower one still reads this).
    SegmentCall& call(std::uint64_t sequence, int rank) const noexcept;

    struct Header;

private:
    SharedSegment(UniqueFd descriptor, void* base, std::size_t size, int world, int rank, std::size_t slot_bytes);
    Header& header() const noexcept;
    /// Arrives at the barrier and waits until every rank has: true then. Each time the
    /// wait wakes without the barrier passed (every 20 ms, and at `deadline`), `look` is
    /// called with the barrier's generation (see passed()); it throws to end the wait, or
    /// returns true to stop it (arrive_and_wait then returns false, its arrival left counted).
    bool arrive_and_wait(Clock::time_point deadline, const std::function<bool(std::uint32_t generation)>& look);
    /// Whether the barrier of `generation` has passed.
    bool passed(std::uint32_t generation) const noexcept;
    [[noreturn]] void fail_with(const std::string& text);
    /// Watches rank `rank`'s `pid` from now on (watch_peers' way, for one peer).
    void watch_peer(int rank, pid_t pid);
    /// The rank of a watched peer that has ended, or -1.
    int ended_peer() const;

    UniqueFd descriptor_;  ///< rank 0's memfd until close_descriptor()
    void* base_ = nullptr;
    std::size_t size_ = 0;
    int world_ = 0;
    int rank_ = 0;
    std::size_t slot_bytes_ = 0;
    std::chrono::nanoseconds spin_for_{};  ///< how long a barrier spins before it sleeps
    /// How this rank watches another one (watch_peers).
    struct Peer {
        pid_t pid = 0;
        UniqueFd pidfd;                  ///< none for this rank, or on a kernel without pidfds
        bool gone_when_watched = false;  ///< its pid was gone already when watch_peers ran
    };
    std::vector<Peer> peers_;  ///< by rank
};

MPIFY_END_DETAIL_NAMESPACE
