#include "ddp/rendezvous.hpp"

#include "common/clock.hpp"

#include <mpify/error.hpp>
#include <mpify/interrupt.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

std::string key(const std::string& phase, int rank) { return "mpify/" + phase + "/" + std::to_string(rank); }

std::string joined(const std::vector<int>& ranks) {
    std::string text;
    for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
    return text;
}

struct Missing {
    std::string ranks;  ///< "2, 3"
    std::string hosts;  ///< " (2, 3 on host b ...)" when the store knows
};

// The ranks that have not set `phase`/<rank>. A wait that timed out was answered "timed
// out" by the store, so the connection can ask again.
Missing missing_ranks(store::Client& store, const DdpSettings& s, const std::string& phase) {
    try {
        std::vector<int> missing;
        for (int rank = 0; rank < s.world_size; ++rank)
            if (!store.check({key(phase, rank)})) missing.push_back(rank);
        return {joined(missing), hosts_of(missing, store.members())};
    } catch (const std::exception& e) {
        return {fmt::format("among 0..{}", s.world_size - 1),
                fmt::format(" (the store could not say which: {})", e.what())};
    }
}

}  // namespace

Endpoint store_endpoint(const DdpSettings& s) {
    if (!s.store.empty()) return Endpoint::parse(s.store, "MPIFY_DDP_STORE");
    Endpoint e;
    e.host = s.addr;
    e.port = s.port;
    return e;
}

c10::intrusive_ptr<store::Client> connect_store(const DdpSettings& s) {
    const auto when = s.segment.empty() ? store::Client::Connect::now : store::Client::Connect::at_first_use;
    return c10::make_intrusive<store::Client>(store_endpoint(s), s.timeout, &mpify::interrupt_requested, s.store_secret,
                                              when);
}

std::string hosts_of(const std::vector<int>& ranks, const std::vector<store::Member>& members) {
    if (ranks.empty() || members.empty()) return "";  // one machine: no caller introduces itself
    std::map<std::string, std::vector<int>> by_host;
    for (int r : ranks) {
        std::string host;
        for (const store::Member& m : members)
            if (r >= m.number && r < m.number + m.local_ranks)
                host = fmt::format("on {} (its caller is {})", m.host, store::state_name(m.state));
        by_host[host.empty() ? "from a machine the store has not heard from" : host].push_back(r);
    }
    std::string text;
    for (const auto& [host, its_ranks] : by_host)
        text += fmt::format("{}{} {}", text.empty() ? "" : "; ", joined(its_ranks), host);
    // A machine refused at the rendezvous says why (a different number of local ranks...).
    for (const store::Member& m : members)
        if (m.state == store::Member::State::failed)
            text += fmt::format("; the caller on {} failed: {}", m.host, m.note);
    return " (" + text + ")";
}

namespace {

// Sets `phase`/<s.rank> to `value`, waits (within s.timeout) until every rank has set its
// key, and returns every rank's value, by rank: one round trip to the store. Throws Error
// naming the ranks still missing, and, when the store failed before the timeout (it
// closed the connection, refused the request), what it said.
std::vector<std::string> post_and_wait(store::Client& store, const DdpSettings& s, const std::string& phase,
                                       const std::string& value, const char* failure) {
    std::vector<std::string> keys;
    for (int rank = 0; rank < s.world_size; ++rank) keys.push_back(key(phase, rank));
    const auto started = Clock::now();
    try {
        return store.exchange(key(phase, s.rank), value, keys, s.timeout);
    } catch (const std::exception& e) {
        const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
        const std::string when = waited < s.timeout ? fmt::format("after {} ms: {}", waited.count(), first_line_of(e))
                                                    : fmt::format("within {} ms", s.timeout.count());
        const Missing missing = missing_ranks(store, s, phase);
        throw Error(fmt::format("mpify::DdpGuard (rank {} of {}): rank(s) {} {}{} at {} {}. "
                                "Did every process start, with the same world_size, addr and port?",
                                s.rank, s.world_size, missing.ranks, failure, missing.hosts,
                                store.endpoint().describe(), when));
    }
}

}  // namespace

void wait_for_all(store::Client& store, const DdpSettings& s, const std::string& phase, const char* failure) {
    post_and_wait(store, s, phase, std::string(1, '\1'), failure);
}

std::string first_line_of(const std::exception& e) {
    const std::string what = e.what();
    return what.substr(0, what.find('\n'));
}

std::vector<std::string> gather_reports(store::Client& store, const DdpSettings& s, const std::string& phase,
                                        const std::string& report, const char* failure) {
    std::vector<std::string> reports = post_and_wait(store, s, phase, "#" + report, failure);  // "#": never empty
    for (std::string& each : reports) each.erase(0, 1);
    return reports;
}

MPIFY_END_DETAIL_NAMESPACE
