#pragma once
// The ranks of one call that run on other machines (Options::placement), on the caller's
// side: their agents started through the launcher, admitted on the caller's port
// (spawn/connect_back_listener.hpp) and checked (same mpify), and for each a stand-in here
// (worker/stand_in.hpp) that the call's supervisor watches as it watches a local worker.
//
// The launchers are children of the caller. They end when their agents do (after their
// workers); whatever is still running when this object goes is stopped: SIGTERM to the
// launcher's process group, SIGKILL after a grace. An agent outlives nothing: its worker
// dies with it, and it ends its worker when its link to the caller ends or falls silent.
#include "common/clock.hpp"
#include "common/secret_handshake.hpp"
#include "spawn/connect_back_listener.hpp"
#include "spawn/launchers/launcher.hpp"
#include "spawn/start_worker.hpp"

#include <mpify/options.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct LauncherProcess;

/// What the admission watches besides the port: an interrupt of the call.
struct InterruptSignal {
    int fd = -1;                     ///< readable once interrupted (-1: none; then `check` is polled)
    std::function<bool()> check;     ///< true once interrupted
};

class RemoteRanks {
public:
    /// Starts an agent for each of `ranks` (the call's ranks placed remotely, in order, by
    /// placed_ranks) through the resolved `placement`'s launcher and waits until each has connected back and said
    /// hello, or `deadline` (the sooner of the call's and Placement::start_timeout).
    /// Throws UsageError for a template that cannot work, SpawnError naming the launcher's
    /// command and its last lines when one ends first or a rank does not come in time
    /// (and the refused connections, if any), Interrupted when `interrupt` comes first.
    RemoteRanks(const Placement& placement, const std::vector<PlacedRank>& ranks, int world_size,
                std::optional<Clock::time_point> call_deadline, InterruptSignal interrupt,
                const std::map<std::string, std::string>& call_variables);
    ~RemoteRanks();
    RemoteRanks(const RemoteRanks&) = delete;
    RemoteRanks& operator=(const RemoteRanks&) = delete;

    /// Asks `rank`'s agent to start its worker with `variables` (the call's, on top of the
    /// agent's environment), without waiting for its answer: asked of every rank first,
    /// the machines start their workers at once. start() waits for the answer.
    void ask_to_start(int rank, const std::map<std::string, std::string>& variables);

    /// Has `rank`'s agent start its worker with `variables` (unless ask_to_start did), waits
    /// until it has, and starts the rank's stand-in here with its output as `relay` says.
    /// Throws SpawnError when the worker cannot start there.
    StartedWorker start(int rank, const std::map<std::string, std::string>& variables, Relay relay,
                        std::optional<Clock::time_point> deadline);

    /// Where the library at `path` (the call's function's) is on `rank`'s machine: its
    /// agent finds the same bytes at that path or in its cache, or receives them
    /// (spawn/library_shipping.hpp). Before start(). Throws SpawnError naming the rank,
    /// its host and why when it cannot.
    std::string library_path(int rank, const std::string& path, std::optional<Clock::time_point> deadline);

    /// Ends `rank`'s agent without a worker (instead of start), after its node template has
    /// loaded the libraries placed (mpify::warm_nodes); they stay there. Without waiting:
    /// await_dismissal() does.
    void dismiss(int rank);
    /// Waits until `rank`'s dismissed agent says it is done: "" when its node template
    /// loaded the libraries (or it has none), else why not. Throws SpawnError naming the
    /// rank and its host when the agent does not answer by `deadline`.
    std::string await_dismissal(int rank, std::optional<Clock::time_point> deadline);

    /// The host `rank` runs on, as its agent named it.
    const std::string& host(int rank) const;

private:
    struct Launched;
    struct Rank;
    void launch(const Placement& placement, int rank, const std::string& host);
    /// Asks the node template of `launched` for its agent (a new template when the one
    /// running takes no request). Throws SpawnError when none does.
    void ask_node_template(Launched& launched);
    void admit(int world_size, Clock::time_point deadline, const InterruptSignal& interrupt);
    void greet(Rank& rank, Clock::time_point deadline);
    [[noreturn]] void launcher_failed(const Launched& launched, const std::string& what);
    /// Gives the launchers `farewell` to end, then stops them and what they started.
    void stop_launchers(std::chrono::milliseconds farewell) noexcept;
    /// "at +N ms" since the ranks began to start, for the debug log.
    std::string since_start() const;

    std::optional<ConnectBackListener> listener_;  // closed once every agent is in
    CallSecret secret_;
    std::string local_worker_program_;  // mpify-worker here: the stand-ins
    std::string worker_program_;        // mpify-worker on the hosts: the agents
    std::string endpoint_;              // where agents connect back, as MPIFY_CONNECT says it
    /// The command that starts a node template on a host (%C of the placement's command);
    /// empty: no node templates, a launcher per rank.
    std::string node_template_program_;
    std::set<std::string> renewed_;     // node templates started again during this call
    std::set<const LauncherProcess*> heard_from_;  // node templates whose earlier output is dropped
    std::vector<std::unique_ptr<Launched>> launched_;
    std::map<int, Rank> ranks_;
    Clock::time_point started_at_;
};

MPIFY_END_DETAIL_NAMESPACE
