// mpify's shared-memory backend, for the ranks of one in_ddp call on one machine: its
// collectives are copied through memory the ranks share (shared_memory/shared_memory_group.hpp).
// in_ddp's caller makes that memory before it starts the ranks, and they form the group by
// meeting there once, the store untouched; without it (or when a rank cannot open it), the
// group forms in one round through the store, rank 0 making the memory. The calls it does
// not serve go to a Gloo group it forms when the first one is made.
#include "ddp/backends/collective_backend.hpp"
#include "ddp/backends/gloo/gloo_group.hpp"
#include "ddp/backends/segment_ahead.hpp"
#include "ddp/backends/shared_memory/shared_memory_group.hpp"
#include "ddp/collective_wait.hpp"
#include "ddp/rendezvous.hpp"

#include <mpify/error.hpp>
#include <mpify/interrupt.hpp>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <unistd.h>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Slots of the shared-memory group: a collective's tensor goes through in pieces of this size.
constexpr std::size_t slot_bytes = 4u << 20;

// Says, under MPIFY_DEBUG, that the group goes to Gloo, and why (which ranks could not
// open the memory, and what stopped them).
void debug_gloo_instead(const std::string& why) {
    if (debug_wanted()) debug_line("the shared-memory group cannot form (" + why + "); using Gloo");
}

// What a rank reports once it has tried to open the group's shared memory: "pid N", or
// "! why not".
std::string opened_report(const std::string& trouble) {
    return trouble.empty() ? "pid " + std::to_string(::getpid()) : "! " + trouble;
}

// The group's segment, by rank 0 made and said where it is, by the others opened; empty
// with `trouble` set when this rank could not.
std::optional<SharedSegment> make_or_open_segment(store::Client& store, const DdpSettings& s, std::string& trouble) {
    const std::string where_key = "mpify/shm/segment";
    try {
        if (s.rank == 0) {
            SharedSegment segment = SharedSegment::create(s.world_size, slot_bytes);
            store.set(where_key, store::as_bytes(segment.locator()));
            return segment;
        }
        return SharedSegment::open(store::as_string(store.get(where_key)), s.world_size, s.rank);
    } catch (const std::exception& e) {
        trouble = first_line_of(e);
        if (s.rank == 0) store.set(where_key, store::as_bytes("none"));  // the others must not wait for it
    }
    return std::nullopt;
}

// Where a rank that cannot open the segment its caller made says why: the ranks waiting
// for it there look for this key, and then every rank forms the next backend.
constexpr const char* refused_key = "mpify/shm/refused";

// The segment in_ddp's caller made (s.segment), opened and met in by every rank, with
// every rank's pid (by rank); none when a rank could not open it. A rank waiting there
// for more than a moment connects to the store to look for such a refusal. After one, not
// every rank has been seen: the next backend waits for them to join at the store.
std::optional<SharedSegment> join_segment_made_ahead(const FormingContext& c, std::vector<pid_t>& pids) {
    const DdpSettings& s = c.settings;
    std::optional<SharedSegment> segment;
    try {
        segment.emplace(SharedSegment::open(s.segment, s.world_size, s.rank));
    } catch (const std::exception& e) {
        const std::string why = fmt::format("rank {}: {}", s.rank, first_line_of(e));
        debug_gloo_instead(why);
        c.store->set(refused_key, store::as_bytes(why));
        return std::nullopt;
    }
    pids = segment->join(Clock::now() + s.timeout, [&] {
        if (call_stopping())
            throw Error(fmt::format("mpify::DdpGuard (rank {} of {}): {} while this rank waited for the others to "
                                    "join the group",
                                    s.rank, s.world_size, why_the_call_stops()));
        return c.store->check({refused_key});
    });
    if (pids.empty()) {
        if (debug_wanted()) debug_gloo_instead(store::as_string(c.store->get(refused_key)));  // only then asked
        return std::nullopt;
    }
    c.log.reached("every rank joined the shared memory made ahead");
    return segment;
}

// The segment made by rank 0 as the group forms, with every rank's pid (by rank): every
// rank reports (with its pid) in one round of the store, the round where the group's ranks
// join. None when some rank could not open the segment: every rank sees the same reports.
std::optional<SharedSegment> form_segment_through_store(FormingContext& c, std::vector<pid_t>& pids) {
    const DdpSettings& s = c.settings;
    std::string trouble;
    std::optional<SharedSegment> segment = make_or_open_segment(*c.store, s, trouble);
    const std::vector<std::string> reports =
        gather_reports(*c.store, s, "shm/opened", opened_report(trouble), "did not join the group");
    c.log.reached("every rank joined and opened the shared memory");
    std::string failures;
    for (std::size_t rank = 0; rank < reports.size(); ++rank) {
        if (reports[rank].rfind("pid ", 0) == 0) pids.push_back(static_cast<pid_t>(std::stol(reports[rank].substr(4))));
        else failures += fmt::format("{}rank {}: {}", failures.empty() ? "" : "; ", rank, reports[rank].substr(2));
    }
    if (!failures.empty()) {
        debug_gloo_instead(failures);
        c.ranks_joined = true;  // every rank reported
        return std::nullopt;
    }
    segment->close_descriptor();  // every rank has its own mapping now
    segment->watch_peers(pids);
    return segment;
}

// The shared-memory group as the guard holds it: an abandoned one ends its waits at once
// (the peers' too: this rank has left) and is closed as usual; only a Gloo group it formed
// for other calls is let go.
class FormedSharedMemoryGroup final : public FormedGroup {
public:
    FormedSharedMemoryGroup(c10::intrusive_ptr<SharedMemoryGroup> shared, const c10::intrusive_ptr<c10d::Store>& store)
        : FormedGroup(as_process_group(shared, store, "mpify-shared-memory")), shared_(std::move(shared)) {}

    void abandon() noexcept override { shared_->abandon(); }

private:
    c10::intrusive_ptr<SharedMemoryGroup> shared_;
};

class SharedMemoryBackend final : public CollectiveBackend {
public:
    Backend kind() const override { return Backend::shared_memory; }

    std::string unavailable_because(const DdpSettings& s) const override {
        if (ranks_of_one_machine(s)) return "";
        return "Backend::shared_memory serves the ranks of one in_ddp call on one machine (with no port given); this "
               "group is not one";
    }

    // Null when some rank could not open the segment: every rank learns it, and all of
    // them go on to the next backend (Gloo).
    std::unique_ptr<FormedGroup> form(FormingContext& c) const override {
        const DdpSettings& s = c.settings;
        std::vector<pid_t> pids;
        std::optional<SharedSegment> segment = s.segment.empty() ? form_segment_through_store(c, pids)
                                                                 : join_segment_made_ahead(c, pids);
        if (!segment) return nullptr;
        // Calls the shared memory does not serve go to a Gloo group, formed at the first one.
        auto waker = std::make_shared<std::unique_ptr<GlooLoopWaker>>();
        auto form_fallback = [store = c.store, s, waker] {
            GlooGroup gloo = form_gloo_group(store, s, FormingLog(s.rank), "fallback-gloo");
            *waker = std::move(gloo.waker);
            return gloo.backend;
        };
        auto shared = c10::make_intrusive<SharedMemoryGroup>(std::move(*segment), s.timeout, form_fallback);
        return std::make_unique<FormedSharedMemoryGroup>(std::move(shared), c.store);
    }
};

}  // namespace

const CollectiveBackend& shared_memory_backend() {
    static const SharedMemoryBackend backend;
    return backend;
}

std::optional<SharedSegment> segment_ahead_of_ranks(const std::map<std::string, std::string>& environment, int n) {
    const std::string ranks = std::to_string(n);
    try {
        // As the caller's rank will find them: what ranch adds for it, what in_ddp gives
        // every rank, what the process has.
        const DdpSettings s = settings_from_variables([&](const char* name) -> const char* {
            if (std::strcmp(name, "LOCAL_RANK") == 0) return "0";
            if (std::strcmp(name, "LOCAL_WORLD_SIZE") == 0) return ranks.c_str();
            const auto given = environment.find(name);
            return given != environment.end() ? given->second.c_str() : std::getenv(name);
        });
        if (&choose_backend(s) != &shared_memory_backend()) return std::nullopt;
        return SharedSegment::create(n, slot_bytes);
    } catch (const std::exception&) {  // the ranks form as they would without it, and say why
        return std::nullopt;
    }
}

MPIFY_END_DETAIL_NAMESPACE
