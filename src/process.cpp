// mpify::init and the rank queries.
#include "template_server.hpp"
#include "worker.hpp"
#include "worker_host.hpp"

#include <mpify/process.hpp>

#include <cstdlib>
#include <string>

namespace mpify {
namespace {

int env_int(const char* name, int fallback) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') return fallback;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    return *end == '\0' ? static_cast<int>(value) : fallback;
}

}  // namespace

void init(int /*argc*/, char** /*argv*/) {
    detail::mark_initialized();
    detail::serve_if_template();  // in a template, never returns (its workers go on below)
    detail::serve_if_worker();
}

int local_rank() { return env_int("LOCAL_RANK", 0); }

int local_world_size() { return env_int("LOCAL_WORLD_SIZE", 1); }

bool is_worker() { return detail::is_worker_process(); }

}  // namespace mpify
