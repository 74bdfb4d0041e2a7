// in_ddp's part in the caller: the rendezvous store that every rank's DdpGuard meets at,
// and, when the group spans machines, this machine's place in it.
#include "common/clock.hpp"
#include "common/endpoint.hpp"
#include "common/posix.hpp"
#include "ddp/backends/segment_ahead.hpp"
#include "ddp/ddp_settings.hpp"
#include "ddp/rank_device.hpp"
#include "ddp/rendezvous.hpp"
#include "store/client.hpp"
#include "store/member.hpp"
#include "store/server.hpp"

#include <mpify/ddp_guard.hpp>
#include <mpify/error.hpp>
#include <mpify/interrupt.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// This caller's place in a group across machines, agreed with the others through the
// store, and its connection there: the store notices when it ends without a goodbye.
class MachineInGroup {
public:
    MachineInGroup(const Endpoint& endpoint, const DdpOptions& options, int base_rank, int n, int world)
        : base_(base_rank) {
        const std::string call = std::to_string(next_call_number(endpoint.text()));
        connect_to_this_call(endpoint, call, options.timeout);
        const std::string host = this_host_name();
        store_->introduce(base_, n, host);
        try {
            agree(host, n, world);
        } catch (const std::exception& e) {
            leave(true, e.what());  // the machines waiting for this one's ranks learn why
            throw;
        }
        // The master opens the call to the others only now: its shape is the group's.
        if (base_ == 0) store_->set("mpify/call", store::as_bytes(call));
    }

    /// After a failure of this machine's ranks: what the store says of the other machines,
    /// when one of them went away or failed; empty when they are all still there.
    /// A machine killed breaks this machine's collectives at the moment the store sees its
    /// caller's connection end: when no other machine is known gone yet, the store is
    /// given a moment (silent_departure_key) to take that in.
    std::string other_machines_news() {
        std::vector<store::Member> members;
        try {
            members = store_->members();
            const bool one_is_gone = std::any_of(members.begin(), members.end(), [](const store::Member& m) {
                return m.state == store::Member::State::gone;
            });
            if (!one_is_gone && waited_for_a_departure()) members = store_->members();
        } catch (const std::exception&) {
            return fmt::format("the group's rendezvous at {}, hosted by the machine of rank 0, is gone: that machine "
                               "failed, or its in_ddp ended",
                               store_->endpoint().describe());
        }
        std::string news;
        for (const store::Member& m : members) {
            if (m.number == base_) continue;
            const std::string ranks = fmt::format("ranks {}-{} on {}", m.number, m.number + m.local_ranks - 1, m.host);
            if (m.state == store::Member::State::gone)
                news += fmt::format("{}{} went away without a word: their caller died, or their machine failed",
                                    news.empty() ? "" : "; ", ranks);
            else if (m.state == store::Member::State::failed)
                news += fmt::format("{}{} failed: {}", news.empty() ? "" : "; ", ranks, m.note);
        }
        return news;
    }

    /// Whether the store says, within a moment, that a machine went away without a word.
    bool waited_for_a_departure() {
        constexpr std::chrono::milliseconds moment{250};
        try {
            store_->wait({store::silent_departure_key}, moment);
            return true;
        } catch (const std::exception&) {  // timed out: nobody went away (a store gone throws on)
            return store_->check({store::silent_departure_key});
        }
    }

    /// Says goodbye: a clean end, or the failure `note`. The master may have ended first
    /// (nobody is left to tell): that is not an error.
    void leave(bool failed, const std::string& note) noexcept {
        // Other machines quote the note in their errors: its start says what failed.
        constexpr std::size_t longest_note = 2000;
        try {
            store_->leave(failed, note.size() > longest_note ? note.substr(0, longest_note) + " [...]" : note);
        } catch (...) {
        }
    }

private:
    // The store of this call, not of the one before: a program that calls in_ddp again
    // with the same port may reach the master's previous store in the moment before it
    // closes. Each process numbers its calls to an address; the master writes its number
    // into its new store, and the others wait for the store that has theirs.
    void connect_to_this_call(const Endpoint& endpoint, const std::string& call, std::chrono::milliseconds timeout) {
        const auto deadline = Clock::now() + timeout;
        auto left = [&] {
            return std::max(std::chrono::milliseconds(1),
                            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
        };
        for (;;) {
            store_ = c10::make_intrusive<store::Client>(endpoint, left(), &mpify::interrupt_requested);
            if (base_ == 0) return;  // the master's own, new store
            std::string found;
            try {
                found = store::as_string(store_->get("mpify/call"));
            } catch (const std::exception&) {  // that store closed under us, or time is up
            }
            if (found == call) return;
            store_.reset();
            if (Clock::now() >= deadline)
                throw Error(fmt::format("mpify::in_ddp: the rendezvous at {} is still that of another in_ddp call "
                                        "(call {} there, {} here) after {} ms: does every machine make the same "
                                        "in_ddp calls?",
                                        endpoint.describe(), found.empty() ? "?" : found, call, timeout.count()));
            std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the old store is closing
        }
    }

    static int next_call_number(const std::string& endpoint) {
        static std::mutex mutex;
        static std::map<std::string, int> calls;  // guarded by mutex
        std::lock_guard lock(mutex);
        return ++calls[endpoint];
    }

    // The first caller to arrive fixes the group's shape; the others must agree with it,
    // and no rank may be claimed by two machines.
    void agree(const std::string& host, int n, int world) {
        const std::string shape = fmt::format("{} ranks, {} per machine", world, n);
        const std::string agreed =
            store::as_string(store_->compareSet("mpify/shape", {}, store::as_bytes(shape + "|" + host)));
        const std::string agreed_shape = agreed.substr(0, agreed.find('|'));
        if (agreed_shape != shape)
            throw UsageError(fmt::format(
                "mpify::in_ddp: this machine ({}) was started for a group of {}, but {} started one of {}. Every "
                "machine must run in_ddp with the same number of local ranks and the same number of machines.",
                host, shape, agreed.substr(agreed.find('|') + 1), agreed_shape));
        const std::string me = fmt::format("{} (pid {})", host, ::getpid());
        for (int rank = base_; rank < base_ + n; ++rank) {
            const std::string owner =
                store::as_string(store_->compareSet("mpify/owner/" + std::to_string(rank), {}, store::as_bytes(me)));
            if (owner != me)
                throw UsageError(fmt::format("mpify::in_ddp: rank {} is claimed by {} and by this machine, {}; give "
                                             "each machine its own base_rank (node rank)",
                                             rank, owner, me));
        }
    }

    c10::intrusive_ptr<store::Client> store_;
    int base_;
};

}  // namespace

namespace {

// A group whose ranks this caller places on other machines (Options::placement): all of
// it is this call's, and its store listens where those machines reach the caller, for
// connections that prove a fresh secret (the ranks get it with the call's environment,
// over their authenticated links).
void with_remote_rendezvous(const DdpOptions& options, const Placement& placement, const GroupPlace& place, int n,
                            const std::function<void(const std::map<std::string, std::string>&)>& run) {
    if (place.world_size != n || options.nodes != 1)
        throw UsageError(fmt::format(
            "mpify::in_ddp: with Options::placement on other machines the group is this call's {} ranks; leave "
            "DdpOptions' nodes, node_rank, base_rank and world_size at their defaults (a group of {} was asked)",
            n, place.world_size));
    Endpoint endpoint;
    endpoint.host = address_toward_hosts(placement.caller_address, placement.hosts);
    endpoint.port = options.port;
    const CallSecret secret = CallSecret::fresh();
    std::optional<store::Server> server;
    try {
        server.emplace(endpoint, secret);
    } catch (const std::exception& e) {
        throw UsageError(fmt::format("mpify::in_ddp: cannot open the rendezvous store for the ranks on other "
                                     "machines: {}",
                                     e.what()));
    }
    DdpOptions group = options;
    group.addr = endpoint.host;  // each machine's Gloo takes its address on the route here
    std::map<std::string, std::string> environment =
        environment_for(group, place, server->endpoint().text(), server->endpoint().port);
    environment[store_secret_var] = secret.hex();
    run(environment);
}

}  // namespace

void with_rendezvous(const DdpOptions& options, const Placement& placement, int n, int restarts,
                     const std::function<void(const std::map<std::string, std::string>&)>& run) {
    const GroupPlace place = place_in_group(options, n, "mpify::in_ddp");
    const int world = place.world_size;
    if (restarts > 0 && world != n)
        throw UsageError(fmt::format(
            "mpify::in_ddp: Options::restarts needs a group that this call owns (its {} ranks; a group of {} was "
            "asked): callers on other machines would restart apart. Place the ranks from one caller "
            "(Options::placement), or restart the whole job with your launcher",
            n, world));
    if (options.port < 0 || options.port > 65535)
        throw UsageError(fmt::format("mpify::in_ddp: port {} is not a TCP port", options.port));
    // Ranks on other machines are counted there, by their own guards.
    check_gpus(options.gpus, placement.launcher == Placement::Launcher::this_machine ? n : 1, "mpify::in_ddp");
    if (placement.launcher != Placement::Launcher::this_machine) {
        with_remote_rendezvous(options, placement, place, n, run);
        return;
    }

    if (world == n && options.port == 0) {
        // The whole group is here and no port was asked for: its store is a UNIX socket of
        // an unguessable name in the abstract namespace, that closes other users'
        // connections; nothing listens on the network, nothing is left on disk.
        Endpoint endpoint;
        endpoint.unix_path = private_socket_name();
        const store::Server server(endpoint);
        std::map<std::string, std::string> environment = environment_for(options, place, endpoint.text(), 0);
        // The memory a shared-memory group meets in, made now: the ranks form it there, and
        // need the store only for what that memory does not serve.
        const std::optional<SharedSegment> segment = segment_ahead_of_ranks(environment, n);
        if (segment) environment[segment_var] = segment->locator();
        run(environment);
        return;
    }

    Endpoint endpoint;
    endpoint.host = options.addr;
    endpoint.port = options.port;
    std::optional<store::Server> server;  // hosted by the caller with base_rank 0, for every machine
    if (place.base_rank == 0) {
        try {
            server.emplace(endpoint);
        } catch (const std::exception& e) {
            throw UsageError(fmt::format("mpify::in_ddp: cannot open the rendezvous store: {}. {}", e.what(),
                                         options.port != 0 ? "Is the port in use? Choose another, or 0 for a free one."
                                                           : ""));
        }
        endpoint = server->endpoint();
    } else if (options.port == 0) {
        throw UsageError("mpify::in_ddp: a caller with base_rank > 0 joins the group of the caller with "
                         "base_rank 0; give it that caller's addr and port (port 0 cannot be agreed on)");
    }
    MachineInGroup machine(endpoint, options, place.base_rank, n, world);
    try {
        run(environment_for(options, place, endpoint.text(), endpoint.port));
    } catch (const std::exception& e) {
        // Broken collectives here may be the echo of another machine's end: say so.
        const std::string news = machine.other_machines_news();
        machine.leave(true, e.what());
        if (news.empty()) throw;
        const std::string sentence = news.back() == '.' ? news : news + ".";  // a failure note may end with one
        std::throw_with_nested(Error(fmt::format("mpify::in_ddp (ranks {}-{}): {} What failed here: {}",
                                                 place.base_rank, place.base_rank + n - 1, sentence, e.what())));
    } catch (...) {
        machine.leave(true, "an exception that is not a std::exception");
        throw;
    }
    machine.leave(false, "");
}

MPIFY_END_DETAIL_NAMESPACE
