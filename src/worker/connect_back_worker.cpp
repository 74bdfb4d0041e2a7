#include "worker/connect_back_worker.hpp"

#include "common/endpoint.hpp"
#include "common/environment_number.hpp"
#include "common/poll_set.hpp"
#include "common/posix.hpp"
#include "common/secret_handshake.hpp"
#include "contract/process_contract.hpp"
#include "worker/remote_agent.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// How long a remote worker tries to reach its caller. The caller's port listens before any
// launcher starts, so a connection that does not come within this time (two SYNs lost, at
// 0 and 1 s) will not come: a caller that is gone, or a port this machine cannot reach (a
// firewall, a wrong route). Giving up soon is what tells the caller: its launcher ends,
// with this worker's words as its last output, within 5 s of the call's start even when
// the launcher took a second to start the agent.
constexpr std::chrono::seconds reach_patience{3};
// How long the caller may take to check this worker's proof once connected (it admits
// agents one handshake at a time), cut handshakes tried again included.
constexpr std::chrono::seconds proof_patience{30};
// The pause before trying a cut handshake again, growing with each try up to ten times.
constexpr std::chrono::milliseconds retry_pause{20};

[[noreturn]] void give_up(const std::string& where, int rank, const std::string& why) {
    std::fprintf(stderr, "mpify worker (rank %d): cannot join its caller at %s: %s\n", rank, where.c_str(),
                 why.c_str());
    std::fflush(stderr);
    ::_exit(70);
}

// A launcher that cannot pass environment variables (ssh) writes the secret as the first
// line of the agent's stdin: 64 hex digits and a newline, read within this time.
constexpr std::chrono::seconds stdin_patience{10};

std::string secret_line_from_stdin() {
    std::string line;
    const auto deadline = Clock::now() + stdin_patience;
    PollSet fds;
    char c = 0;
    while (line.size() <= 2 * CallSecret::size) {
        fds.clear();
        fds.add(STDIN_FILENO, POLLIN);
        if (fds.wait(deadline) == 0) {
            if (Clock::now() >= deadline) break;
            continue;
        }
        if (retry_on_eintr([&] { return ::read(STDIN_FILENO, &c, 1); }) != 1 || c == '\n') break;
        line.push_back(c);
    }
    // Nothing else comes that way: what the agent starts reads nothing from the launcher.
    if (const UniqueFd null = open_dev_null(O_RDONLY); null) ::dup2(null.get(), STDIN_FILENO);
    return line;
}

// The secret, taken out of the environment (or stdin) at once.
std::optional<CallSecret> take_secret() {
    const char* text = std::getenv(connect_secret_env_var);
    const std::string hex = text != nullptr ? std::string(text) : secret_line_from_stdin();
    ::unsetenv(connect_secret_env_var);
    try {
        return CallSecret::from_hex(hex);
    } catch (const std::invalid_argument&) {
        return std::nullopt;
    }
}

}  // namespace

void serve_if_connecting() {
    const char* where_text = std::getenv(connect_env_var);
    if (where_text == nullptr) return;
    const std::string where = where_text;
    ::unsetenv(connect_env_var);  // processes this worker starts are not workers
    const std::optional<CallSecret> secret = take_secret();
    const int rank = static_cast<int>(environment_number(connect_rank_env_var, -1, Malformed::use_fallback,
                                                         "mpify worker", 0, INT_MAX));
    if (rank < 0) give_up(where, rank, std::string(connect_rank_env_var) + " is not a rank");
    if (!secret)
        give_up(where, rank,
                std::string(connect_secret_env_var) +
                    " (or the first line of stdin) is missing or not a call's secret");
    join_caller_as_agent(where, *secret, rank, UniqueFd());
}

void join_caller_as_agent(const std::string& where, const CallSecret& secret, int rank, UniqueFd node_template) {
    try {
        const Endpoint caller = Endpoint::parse(where, connect_env_var);
        const Clock::time_point proven_by = Clock::now() + proof_patience;
        for (int tries = 1;; ++tries) {
            UniqueFd channel = connect_to(
                caller, Clock::now() + reach_patience, []() noexcept { return false; }, "the caller's port",
                "Is the caller still running, and does this machine reach that address (a "
                "firewall, a route)?");
            try {
                prove_to_caller(channel.get(), secret, rank, proven_by);
            } catch (const HandshakeCut&) {
                // The caller closed it unanswered, making room in a flood of connections on
                // its port: a new connection gets another turn, while there is time.
                const auto pause = retry_pause * std::min(tries, 10);
                if (Clock::now() + pause >= proven_by) throw;
                std::this_thread::sleep_for(pause);
                continue;
            }
            run_remote_agent(std::move(channel), where, rank, std::move(node_template));
        }
    } catch (const std::exception& e) {
        give_up(where, rank, e.what());
    }
}

MPIFY_END_DETAIL_NAMESPACE
