// <mpify/process.hpp>, all of it: mpify::init, where a process that mpify started turns
// into what it was started as, and the queries of a process's place in the current call.
#include "common/environment_number.hpp"
#include "contract/process_contract.hpp"
#include "worker/connect_back_worker.hpp"
#include "worker/node_template.hpp"
#include "contract/init_ran.hpp"
#include "worker/serve.hpp"
#include "worker/stand_in.hpp"
#include "worker/template_server.hpp"

#include <mpify/interrupt.hpp>  // mpify_calls_running
#include <mpify/process.hpp>

#include <atomic>
#include <climits>

MPIFY_BEGIN_NAMESPACE
namespace {

std::atomic<bool> init_called{false};

}  // namespace

void init(int /*argc*/, char** /*argv*/) {
    init_called = true;
    detail::serve_if_template();  // in a template, never returns (its workers go on below)
    detail::serve_if_worker();
    detail::serve_if_node_template();  // a node's template, started by a launcher for a caller elsewhere
    detail::serve_if_connecting();   // a remote rank's agent, started by a launcher on its machine
    detail::serve_if_standing_in();  // a remote rank's stand-in, on the caller's machine
}

int restart_count() {
    // Outside any call the variable is not mpify's (exported by hand, or left by a parent):
    // the answer is 0, as documented.
    if (!is_worker() && mpify_calls_running() == 0) return 0;
    return static_cast<int>(detail::environment_number(detail::restart_count_env_var, 0,
                                                       detail::Malformed::use_fallback, "mpify", 0, INT_MAX));
}

bool is_worker() { return detail::is_worker_process(); }

// Queries that must not throw: a malformed value (set by hand, or by another launcher)
// reads as if the variable were unset.
int local_rank() {
    return static_cast<int>(detail::environment_number("LOCAL_RANK", 0, detail::Malformed::use_fallback, "mpify", 0,
                                                       INT_MAX));
}

int local_world_size() {
    return static_cast<int>(detail::environment_number("LOCAL_WORLD_SIZE", 1, detail::Malformed::use_fallback, "mpify",
                                                       1, INT_MAX));
}

bool detail::init_ran() noexcept { return init_called; }

MPIFY_END_NAMESPACE
