#pragma once
// The ranks that mpify::where() reads: every running call lists its ranks here, from its
// start to its end, and keeps the list current as its workers start and finish. where()
// may be called from any thread, while the calls' own threads change their lists.
#include "forensics/stack_collector.hpp"

#include <mpify/abi.hpp>

#include <sys/types.h>

#include <mutex>
#include <optional>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// One call's running ranks, listed for mpify::where() from construction to destruction.
/// Every member is thread-safe.
class ListedRanks {
public:
    /// A rank the call watches in another process: a local worker, or the stand-in of a
    /// rank on another machine with the stand-in's control socket (owned by the call,
    /// open for as long as it is listed), through which the rank is read there.
    struct Worker {
        StackTarget target;
        int control_fd = -1;
    };

    ListedRanks();
    ~ListedRanks();
    ListedRanks(const ListedRanks&) = delete;
    ListedRanks& operator=(const ListedRanks&) = delete;

    /// The call's workers running now (replacing the earlier list).
    void set_workers(std::vector<Worker> workers);

    /// The caller's own rank `rank` runs on thread `tid` of this process from now until
    /// own_rank_ended().
    void own_rank_started(int rank, pid_t tid) noexcept;
    void own_rank_ended() noexcept;

    /// The caller's own rank, while it runs.
    std::optional<int> own_rank() const;

    /// The ranks listed now, ordered by rank; a remote rank's target holds a copy of its
    /// stand-in's control socket (valid after the call ends).
    std::vector<StackTarget> targets() const;

private:
    mutable std::mutex lock_;
    std::vector<Worker> workers_;
    std::optional<StackTarget> own_rank_;
};

/// The ranks of every call listed now.
std::vector<StackTarget> ranks_of_running_calls();

MPIFY_END_DETAIL_NAMESPACE
