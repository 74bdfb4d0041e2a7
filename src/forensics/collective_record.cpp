#include "forensics/collective_record.hpp"

#include "common/clock.hpp"
#include "common/unique_fd.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// The mapping of this process, made at its first group. Not inherited by a fork
// (MADV_DONTFORK): a template's children each make their own.
struct OwnRecord {
    std::mutex lock;  // making it; the calls themselves take no lock
    pid_t owner = 0;
    CollectiveRecordMemory* memory = nullptr;
};

OwnRecord& own_record() {
    static OwnRecord record;
    return record;
}

CollectiveRecordMemory* make_record_memory() {
    const UniqueFd fd(::memfd_create(collective_record_name, MFD_CLOEXEC));
    if (!fd || ::ftruncate(fd.get(), sizeof(CollectiveRecordMemory)) != 0) return nullptr;
    void* mapped = ::mmap(nullptr, sizeof(CollectiveRecordMemory), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (mapped == MAP_FAILED) return nullptr;
    ::madvise(mapped, sizeof(CollectiveRecordMemory), MADV_DONTFORK);
    auto* memory = static_cast<CollectiveRecordMemory*>(mapped);
    std::memcpy(memory->header.magic, collective_record_magic, sizeof memory->header.magic);
    memory->header.capacity = recorded_calls;
    memory->header.rank = -1;
    return memory;
}

// This process's record while a group is open; null otherwise.
std::atomic<CollectiveRecordMemory*> open_record{nullptr};
std::atomic<std::uint64_t> generation{0};

template <std::size_t N>
void copy_text(char (&to)[N], const std::string& from) {
    const std::size_t n = std::min(from.size(), N - 1);
    std::memcpy(to, from.data(), n);
    to[n] = '\0';
}

// The sequence fields are shared with readers on other threads (and, through the
// mapping, other processes): atomic accesses on plain fields of the fixed layout.
std::uint64_t load_sequence(const RecordedCall& call) { return __atomic_load_n(&call.sequence, __ATOMIC_ACQUIRE); }
void store_sequence(RecordedCall& call, std::uint64_t sequence) {
    __atomic_store_n(&call.sequence, sequence, __ATOMIC_RELEASE);
}

std::string text_of(const char* field, std::size_t size) { return std::string(field, strnlen(field, size)); }

// Beyond what any machine holds: a record that says more was not written by mpify.
constexpr std::int32_t most_ranks = 1'000'000;
constexpr std::uint64_t most_bytes = std::uint64_t(1) << 50;

}  // namespace

void open_collective_record(int rank, int world_size) noexcept {
    // MPIFY_COLLECTIVE_RECORD=0: no record (and no mismatch found between ranks' calls).
    const char* wanted = std::getenv(collective_record_var);
    if (wanted != nullptr && std::string(wanted) == "0") return;
    OwnRecord& own = own_record();
    const std::lock_guard<std::mutex> lock(own.lock);
    if (own.memory == nullptr || own.owner != ::getpid()) {
        own.memory = make_record_memory();
        own.owner = ::getpid();
    }
    CollectiveRecordMemory* memory = own.memory;
    if (memory == nullptr) return;  // no record: the calls go unrecorded
    memory->header.rank = -1;
    for (RecordedCall& call : memory->calls) store_sequence(call, 0);
    memory->header.next_sequence = 0;
    memory->header.world_size = world_size;
    memory->header.rank = rank;
    generation.fetch_add(1);
    open_record.store(memory, std::memory_order_release);
}

std::uint64_t collective_record_generation() noexcept { return generation.load(); }

void close_collective_record() noexcept {
    CollectiveRecordMemory* memory = open_record.exchange(nullptr);
    if (memory != nullptr) memory->header.rank = -1;
}

std::uint64_t record_call_started(const CallToRecord& call) noexcept {
    CollectiveRecordMemory* memory = open_record.load(std::memory_order_acquire);
    if (memory == nullptr) return 0;
    const std::uint64_t sequence = __atomic_add_fetch(&memory->header.next_sequence, 1, __ATOMIC_RELAXED);
    RecordedCall& slot = memory->calls[(sequence - 1) % recorded_calls];
    store_sequence(slot, 0);  // a reader skips it while it is half written
    slot.elements = call.elements;
    slot.bytes = call.bytes;
    slot.started_ns = monotonic_ns();
    slot.ended_ns = 0;
    slot.bucket = call.bucket;
    copy_text(slot.operation, call.operation);
    copy_text(slot.dtype, call.dtype);
    copy_text(slot.detail, call.detail);
    copy_text(slot.site, call.site);
    store_sequence(slot, sequence);
    return sequence;
}

void record_call_ended(std::uint64_t sequence) noexcept {
    CollectiveRecordMemory* memory = open_record.load(std::memory_order_acquire);
    if (memory == nullptr || sequence == 0) return;
    RecordedCall& slot = memory->calls[(sequence - 1) % recorded_calls];
    if (load_sequence(slot) == sequence) __atomic_store_n(&slot.ended_ns, monotonic_ns(), __ATOMIC_RELAXED);
}

std::string implausibility(const CollectiveRecordMemory& record, std::int64_t now_ns) {
    const RecordHeader& h = record.header;
    if (h.capacity != recorded_calls) return fmt::format("it holds {} calls, not {}", h.capacity, recorded_calls);
    if (h.world_size < 1 || h.world_size > most_ranks || h.rank >= h.world_size)
        return fmt::format("rank {} of a group of {}", h.rank, h.world_size);
    for (std::size_t i = 0; i < recorded_calls; ++i) {
        const RecordedCall& slot = record.calls[i];
        const std::uint64_t sequence = load_sequence(slot);
        if (sequence == 0) continue;
        // A call in its slot of the ring, among the last ones entered (a slack of one more
        // ring: two threads may enter calls at once).
        if ((sequence - 1) % recorded_calls != i || sequence > h.next_sequence ||
            h.next_sequence - sequence >= 2 * std::uint64_t(recorded_calls))
            return fmt::format("call #{} in place {} of a ring whose last call is #{}", sequence, i, h.next_sequence);
        const std::int64_t ended_ns = __atomic_load_n(&slot.ended_ns, __ATOMIC_RELAXED);
        if (slot.started_ns <= 0 || slot.started_ns > now_ns ||
            (ended_ns != 0 && (ended_ns < slot.started_ns || ended_ns > now_ns)))
            return fmt::format("call #{} starts or ends where this machine's clock has not been", sequence);
        if (slot.elements < 0 || slot.bytes > most_bytes || std::uint64_t(slot.elements) > 8 * most_bytes ||
            slot.bucket < -1)
            return fmt::format("call #{} of {} elements in {} bytes (bucket {})", sequence, slot.elements, slot.bytes,
                               slot.bucket);
    }
    return "";
}

std::vector<CollectiveCall> recorded_calls_in(const CollectiveRecordMemory& record, std::int64_t now_ns,
                                              std::string* ignored_because) {
    std::vector<CollectiveCall> calls;
    if (std::memcmp(record.header.magic, collective_record_magic, sizeof record.header.magic) != 0 ||
        record.header.rank < 0)
        return calls;
    const std::string implausible = implausibility(record, now_ns);
    if (!implausible.empty()) {
        if (ignored_because != nullptr) *ignored_because = implausible;
        return calls;
    }
    for (const RecordedCall& slot : record.calls) {
        const std::uint64_t sequence = load_sequence(slot);
        if (sequence == 0) continue;
        CollectiveCall call;
        call.sequence = sequence;
        call.operation = text_of(slot.operation, sizeof slot.operation);
        call.dtype = text_of(slot.dtype, sizeof slot.dtype);
        call.elements = slot.elements;
        call.bytes = slot.bytes;
        call.detail = text_of(slot.detail, sizeof slot.detail);
        call.site = text_of(slot.site, sizeof slot.site);
        call.bucket = slot.bucket;
        call.started_seconds_ago = double(now_ns - slot.started_ns) / 1e9;
        const std::int64_t ended_ns = __atomic_load_n(&slot.ended_ns, __ATOMIC_RELAXED);
        call.ended = ended_ns != 0;
        if (call.ended) call.ended_seconds_ago = double(now_ns - ended_ns) / 1e9;
        calls.push_back(std::move(call));
    }
    std::sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) { return a.sequence < b.sequence; });
    return calls;
}

std::vector<CollectiveCall> own_recorded_calls() {
    const CollectiveRecordMemory* memory = open_record.load(std::memory_order_acquire);
    if (memory == nullptr) return {};
    return recorded_calls_in(*memory, monotonic_ns());
}

std::vector<CollectiveCall> read_collective_record(pid_t pid, std::string* ignored_because) {
    const std::string proc = "/proc/" + std::to_string(pid);
    std::ifstream maps(proc + "/maps");
    const std::string wanted = std::string("/memfd:") + collective_record_name;
    std::string line;
    std::uint64_t start = 0;
    while (std::getline(maps, line)) {
        if (line.find(wanted) == std::string::npos) continue;
        std::istringstream fields(line);
        std::string range;
        fields >> range;
        start = std::strtoull(range.substr(0, range.find('-')).c_str(), nullptr, 16);  // 0: not read
    }
    if (start == 0) return {};
    const UniqueFd mem(::open((proc + "/mem").c_str(), O_RDONLY | O_CLOEXEC));
    CollectiveRecordMemory record;
    if (!mem || ::pread(mem.get(), &record, sizeof record, static_cast<off_t>(start)) != ssize_t(sizeof record))
        return {};
    return recorded_calls_in(record, monotonic_ns(), ignored_because);
}

MPIFY_END_DETAIL_NAMESPACE
