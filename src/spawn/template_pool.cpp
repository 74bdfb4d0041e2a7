#include "spawn/template_pool.hpp"

#include "common/clock.hpp"
#include "common/load_time_environment.hpp"
#include "contract/process_contract.hpp"
#include "spawn/exec_spawner.hpp"
#include "spawn/template_client.hpp"

#include <mpify/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// A worker's environment without what makes it one rank's worker.
std::vector<std::string> template_environment(const std::vector<std::string>& worker_env) {
    const std::string worker_marker = std::string(worker_env_var) + "=";
    std::vector<std::string> env;
    for (const std::string& entry : worker_env)
        if (entry.rfind(worker_marker, 0) != 0 && entry.rfind("LOCAL_RANK=", 0) != 0) env.push_back(entry);
    return env;
}

struct Templates {
    std::mutex mutex;
    pid_t owner = ::getpid();  // a forked copy of the caller must not use the original's templates
    struct Slot {
        std::unique_ptr<WarmTemplate> process;
        std::string signature;  // load_time_signature of its environment
    };
    std::map<std::string, Slot> by_program;  // worker program -> its template
    // (program, library) pairs whose template could never fork safely (the library, or
    // the program itself, started a thread as it loaded; the reason is logged). That
    // template is gone; the program's other libraries get a fresh one.
    std::set<std::pair<std::string, std::string>> exec_only;
    std::set<std::string> logged;
};

// Never destroyed: when the caller exits, the kernel closes the control sockets and
// each template, seeing its socket close, exits.
Templates& templates() {
    static Templates* all = new Templates;
    return *all;
}

void log_fallback(Templates& t, const std::string& program, const std::string& reason) {
    const std::string line =
        fmt::format("mpify: starting workers of {} by exec, not from the warm template: {}", program, reason);
    if (t.logged.insert(line).second) std::cerr << line << std::endl;
}

}  // namespace

ChildProcess spawn_from_template(const WorkerHost& host, const LaunchSpec& spec) {
    Templates& t = templates();
    std::lock_guard lock(t.mutex);
    if (t.owner != ::getpid()) {
        for (auto& [program, slot] : t.by_program)
            if (slot.process) slot.process->abandon();
        t.by_program.clear();
        t.owner = ::getpid();
    }
    const std::string& program = host.executable;
    if (t.exec_only.count({program, host.library}) != 0) return spawn_by_exec(spec);

    const std::string signature = load_time_signature(spec.env);
    Templates::Slot& slot = t.by_program[program];
    std::string reason;
    for (int attempt = 0; attempt < 2; ++attempt) {
        try {
            if (slot.process && (!slot.process->alive() || slot.signature != signature)) slot.process.reset();
            if (!slot.process) {
                slot.process = std::make_unique<WarmTemplate>(host, template_environment(spec.env), spec.deadline);
                slot.signature = signature;
            }
            return slot.process->request_worker(spec, host.library);
        } catch (const TemplateUnavailable& e) {
            reason = e.what();
            using Kind = TemplateUnavailable::Kind;
            if (e.kind() == Kind::this_call) break;
            slot.process.reset();  // kills it
            if (e.kind() == Kind::silent) {
                // The call's time is up: that is the call's error, and it names the template.
                if (spec.deadline && Clock::now() >= *spec.deadline)
                    throw SpawnError(fmt::format("mpify: cannot start a worker within the call's timeout: {}; the next "
                                                 "call starts a new template",
                                                 e.what()));
                break;  // no second template for this call: exec, said once
            }
            // No process slot for the fork: the template's slot, given back just now, is
            // the one the exec'd worker takes; the next call starts a template again.
            if (e.kind() == Kind::crowding) break;
            if (e.kind() == Kind::unusable) {
                t.exec_only.insert({program, host.library});
                break;
            }
            // gone or stale: a new template gets one more try
        }
    }
    log_fallback(t, program, reason);
    return spawn_by_exec(spec);
}

MPIFY_END_DETAIL_NAMESPACE
