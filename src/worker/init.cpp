// mpify::init: where a process that mpify started turns into what it was started as.
#include "launch/worker_host.hpp"
#include "warm_template/server.hpp"
#include "worker/serve.hpp"

#include <mpify/process.hpp>

namespace mpify {

void init(int /*argc*/, char** /*argv*/) {
    detail::mark_initialized();
    detail::serve_if_template();  // in a template, never returns (its workers go on below)
    detail::serve_if_worker();
}

bool is_worker() { return detail::is_worker_process(); }

}  // namespace mpify
