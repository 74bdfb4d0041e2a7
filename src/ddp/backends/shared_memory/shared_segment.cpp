#include "ddp/backends/shared_memory/shared_segment.hpp"

#include "common/clock.hpp"
#include "common/posix.hpp"

#include <mpify/error.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <sstream>
#include <system_error>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct SharedSegment::Header {
    std::atomic<std::uint32_t> arrived;     ///< ranks at the current barrier
    std::atomic<std::uint32_t> generation;  ///< barriers passed; the futex word
    std::atomic<std::uint32_t> sleepers;    ///< ranks in (or entering) a futex wait on it
    std::atomic<std::int32_t> failed_rank;  ///< -1, or the first rank that gave up
    std::uint32_t world;
    SegmentCall calls[2][most_ranks];
    std::atomic<std::int32_t> pids[most_ranks];  ///< by rank, as each joined (join); 0 before
};

namespace {

static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "a futex needs a plain 32-bit word");

constexpr std::size_t page = 4096;
constexpr std::size_t header_bytes = (sizeof(SharedSegment::Header) + page - 1) / page * page;

// A waiting rank looks at its peers this often: how late it notices one that ended.
constexpr std::chrono::milliseconds peer_check_interval{20};
// Before sleeping on the futex a rank spins at least this many times: the others usually
// arrive within microseconds.
constexpr int spins_before_sleeping = 200;
// Where every rank can have a core of its own, a rank spins this long before it sleeps: a
// collective's chunks meet at a barrier twice each, and a futex's wake-up costs tens of
// microseconds. Where ranks share cores, spinning would keep a peer off its core.
constexpr std::chrono::microseconds spin_with_a_core_each{50};

// Whether this process may run on at least `world` CPUs.
bool core_for_each_rank(int world) {
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    if (::sched_getaffinity(0, sizeof cpus, &cpus) != 0) return false;
    return CPU_COUNT(&cpus) >= world;
}

std::size_t segment_bytes(int world, std::size_t slot_bytes) {
    return header_bytes + (static_cast<std::size_t>(world) + 1) * slot_bytes;
}

std::uint32_t* futex_word(std::atomic<std::uint32_t>& a) { return reinterpret_cast<std::uint32_t*>(&a); }

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::chrono::nanoseconds patience) {
    const auto ns = std::max<std::int64_t>(patience.count(), 0);
    timespec timeout{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    // Shared (not FUTEX_PRIVATE_FLAG): the word is in a mapping of other processes too.
    (void)::syscall(SYS_futex, futex_word(word), FUTEX_WAIT, expected, &timeout, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>& word) {
    (void)::syscall(SYS_futex, futex_word(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

void* map_shared(int fd, std::size_t size) {
    void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        throw Error(fmt::format("cannot map the group's shared memory ({} bytes): {}", size, std::strerror(errno)));
    return base;
}

}  // namespace

SharedSegment::SharedSegment(UniqueFd descriptor, void* base, std::size_t size, int world, int rank,
                             std::size_t slot_bytes)
    : descriptor_(std::move(descriptor)), base_(base), size_(size), world_(world), rank_(rank), slot_bytes_(slot_bytes),
      spin_for_(core_for_each_rank(world) ? spin_with_a_core_each : std::chrono::nanoseconds::zero()) {}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : descriptor_(std::move(other.descriptor_)), base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)), world_(other.world_), rank_(other.rank_), slot_bytes_(other.slot_bytes_),
      spin_for_(other.spin_for_), peers_(std::move(other.peers_)) {}

SharedSegment::~SharedSegment() {
    if (base_ != nullptr) ::munmap(base_, size_);
}

SharedSegment SharedSegment::create(int world, std::size_t slot_bytes) {
    if (world < 1 || world > most_ranks)
        throw Error(fmt::format("a shared-memory group serves 1 to {} ranks, not {}", most_ranks, world));
    slot_bytes = (slot_bytes + page - 1) / page * page;
    const std::size_t size = segment_bytes(world, slot_bytes);
    UniqueFd fd(::memfd_create("mpify-group", MFD_CLOEXEC));
    if (!fd) throw Error(fmt::format("cannot make the group's shared memory: {}", std::strerror(errno)));
    if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
        throw Error(fmt::format("cannot size the group's shared memory ({} bytes): {}", size, std::strerror(errno)));
    void* base = map_shared(fd.get(), size);
    auto* header = new (base) Header;  // the file's zeros are not yet atomics
    header->arrived.store(0);
    header->generation.store(0);
    header->sleepers.store(0);
    header->failed_rank.store(-1);
    header->world = static_cast<std::uint32_t>(world);
    for (std::atomic<std::int32_t>& pid : header->pids) pid.store(0);
    return SharedSegment(std::move(fd), base, size, world, 0, slot_bytes);
}

std::string SharedSegment::locator() const {
    struct stat st{};
    if (::fstat(descriptor_.get(), &st) != 0) throw Error("the group's shared memory is closed already");
    return fmt::format("{} {} {} {} {} {}", ::getpid(), descriptor_.get(), st.st_dev, st.st_ino, size_, slot_bytes_);
}

SharedSegment SharedSegment::open(const std::string& locator, int world, int rank) {
    std::istringstream in(locator);
    long long pid = 0, fd_number = 0;
    unsigned long long device = 0, inode = 0, size = 0, slot_bytes = 0;
    if (!(in >> pid >> fd_number >> device >> inode >> size >> slot_bytes))
        throw Error(fmt::format("rank 0 published no usable shared memory ('{}')", locator));
    const std::string path = fmt::format("/proc/{}/fd/{}", pid, fd_number);
    UniqueFd fd(retry_on_eintr([&] { return ::open(path.c_str(), O_RDWR | O_CLOEXEC); }));
    if (!fd) throw Error(fmt::format("cannot open rank 0's shared memory at {}: {}", path, std::strerror(errno)));
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0 || st.st_dev != device || st.st_ino != inode || st.st_uid != ::geteuid() ||
        static_cast<unsigned long long>(st.st_size) != size || size != segment_bytes(world, slot_bytes))
        throw Error(fmt::format("{} is not the shared memory rank 0 made for {} ranks", path, world));
    void* base = map_shared(fd.get(), size);
    SharedSegment segment(UniqueFd(), base, size, world, rank, slot_bytes);
    if (static_cast<int>(segment.header().world) != world)
        throw Error(fmt::format("rank 0's shared memory is for {} ranks, this group has {}", segment.header().world,
                                world));
    return segment;
}

SharedSegment::Header& SharedSegment::header() const noexcept { return *static_cast<Header*>(base_); }

std::byte* SharedSegment::slot(int k) const noexcept {
    return static_cast<std::byte*>(base_) + header_bytes + static_cast<std::size_t>(k) * slot_bytes_;
}

SegmentCall& SharedSegment::call(std::uint64_t sequence, int rank) const noexcept {
    return header().calls[sequence % 2][rank];
}

void SharedSegment::watch_peers(const std::vector<pid_t>& pids) {
    peers_.clear();
    peers_.resize(pids.size());
    for (std::size_t r = 0; r < pids.size(); ++r) watch_peer(static_cast<int>(r), pids[r]);
}

void SharedSegment::watch_peer(int rank, pid_t pid) {
    Peer& peer = peers_[static_cast<std::size_t>(rank)];
    peer.pid = pid;
    if (rank == rank_) return;
    peer.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, peer.pid, 0)));
    // Gone already is not an error here: a rank whose function returned at once may
    // have passed every barrier it needed and exited (and been reaped by its parent)
    // before this rank looked. Only a wait for it fails, as for any ended peer.
    peer.gone_when_watched = !peer.pidfd && errno == ESRCH;
}

int SharedSegment::ended_peer() const {
    for (std::size_t r = 0; r < peers_.size(); ++r) {
        if (static_cast<int>(r) == rank_) continue;
        const Peer& peer = peers_[r];
        if (peer.pid == 0) continue;  // not yet known (join)
        if (peer.gone_when_watched) return static_cast<int>(r);
        if (peer.pidfd) {
            pollfd p{peer.pidfd.get(), POLLIN, 0};
            if (::poll(&p, 1, 0) > 0) return static_cast<int>(r);
        } else if (::kill(peer.pid, 0) != 0 && errno == ESRCH) {
            return static_cast<int>(r);  // no pidfd (an old kernel): the pid is gone
        }
    }
    return -1;
}

void SharedSegment::fail() noexcept {
    Header& h = header();
    std::int32_t none = -1;
    h.failed_rank.compare_exchange_strong(none, rank_);
    // Wakes the waiting; the generation stays, so that a barrier every rank did pass
    // still counts as passed (a rank that found the calls differ fails the segment
    // while the others read the same calls). One that was about to sleep sees the
    // failure at its next look, within peer_check_interval.
    futex_wake_all(h.generation);
}

void SharedSegment::fail_with(const std::string& text) {
    fail();
    throw Error(text);
}

void SharedSegment::check_not_failed(const std::string& what) const {
    const std::int32_t failed = header().failed_rank.load(std::memory_order_acquire);
    if (failed < 0) return;
    if (failed == rank_)
        throw Error(fmt::format("{}: this rank's group failed in an earlier collective; the group cannot be used "
                                "any more",
                                what));
    throw Error(fmt::format("{}: rank {} failed in a collective of the group (its own error says why); the group "
                            "cannot be used any more",
                            what, failed));
}

bool SharedSegment::passed(std::uint32_t generation) const noexcept {
    return header().generation.load(std::memory_order_acquire) != generation;
}

bool SharedSegment::arrive_and_wait(Clock::time_point deadline,
                                    const std::function<bool(std::uint32_t generation)>& look) {
    Header& h = header();
    const std::uint32_t generation = h.generation.load(std::memory_order_acquire);
    if (h.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<std::uint32_t>(world_)) {
        // The last to arrive: nobody can arrive at the next barrier before the generation moves.
        h.arrived.store(0, std::memory_order_relaxed);
        // Sequentially consistent with the sleepers' count: either a rank about to sleep
        // sees the new generation, or this one sees it counted and wakes it.
        h.generation.fetch_add(1, std::memory_order_seq_cst);
        if (h.sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(h.generation);
        return true;
    }
    const auto stop_spinning = Clock::now() + spin_for_;
    for (int spin = 0;; ++spin) {
        if (passed(generation)) return true;
        cpu_relax();
        if (spin >= spins_before_sleeping && spin % 64 == 0 && Clock::now() >= stop_spinning) break;
    }
    while (!passed(generation)) {
        h.sleepers.fetch_add(1, std::memory_order_seq_cst);
        // A wait ends by peer_check_interval (`look` then looks at the peers), and by the
        // deadline, so that `look` fails the wait when it is due.
        if (h.generation.load(std::memory_order_seq_cst) == generation)
            futex_wait(h.generation, generation,
                       std::min<std::chrono::nanoseconds>(peer_check_interval, deadline - Clock::now()));
        h.sleepers.fetch_sub(1, std::memory_order_seq_cst);
        if (passed(generation)) break;
        if (look(generation)) return false;
    }
    return true;
}

void SharedSegment::barrier(Clock::time_point deadline, const std::string& what, const WaitingCaller* caller) {
    check_not_failed(what);
    arrive_and_wait(deadline, [&](std::uint32_t generation) {
        check_not_failed(what);
        if (caller != nullptr) caller->while_waiting();
        const int ended = ended_peer();
        // A peer that arrived last moved the generation before it exited: look again, so
        // that its exit between the look above and the poll is not taken for a failure.
        if (ended >= 0 && !passed(generation))
            fail_with(fmt::format("{}: rank {} (pid {}) ended while this rank waited for it", what, ended,
                                  peers_[static_cast<std::size_t>(ended)].pid));
        if (Clock::now() >= deadline && !passed(generation))
            fail_with(fmt::format("{}: the other ranks did not all arrive within the group's timeout", what));
        return false;
    });
}

std::vector<pid_t> SharedSegment::join(Clock::time_point deadline, const std::function<bool()>& give_up) {
    Header& h = header();
    const std::string what = fmt::format("mpify::DdpGuard (rank {} of {})", rank_, world_);
    check_not_failed(what);
    h.pids[rank_].store(static_cast<std::int32_t>(::getpid()), std::memory_order_relaxed);  // released by arriving
    peers_.clear();
    peers_.resize(static_cast<std::size_t>(world_));
    const bool met = arrive_and_wait(deadline, [&](std::uint32_t generation) {
        check_not_failed(what);
        for (int r = 0; r < world_; ++r)  // the peers that arrived since the last look
            if (const pid_t pid = h.pids[r].load(std::memory_order_acquire);
                pid != 0 && peers_[static_cast<std::size_t>(r)].pid == 0)
                watch_peer(r, pid);
        if (give_up()) return true;
        const int ended = ended_peer();
        if (ended >= 0 && !passed(generation))
            fail_with(fmt::format("{}: rank {} (pid {}) ended before every rank joined the group", what, ended,
                                  peers_[static_cast<std::size_t>(ended)].pid));
        if (Clock::now() >= deadline && !passed(generation)) {
            std::string missing;
            for (int r = 0; r < world_; ++r)
                if (h.pids[r].load(std::memory_order_acquire) == 0)
                    missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
            fail_with(fmt::format("{}: rank(s) {} did not join the group within its timeout. Did every process "
                                  "start?",
                                  what, missing));
        }
        return false;
    });
    if (!met) return {};
    std::vector<pid_t> pids(static_cast<std::size_t>(world_));
    for (int r = 0; r < world_; ++r) pids[static_cast<std::size_t>(r)] = h.pids[r].load(std::memory_order_acquire);
    watch_peers(pids);
    return pids;
}

MPIFY_END_DETAIL_NAMESPACE
