#include "worker/template_server.hpp"

#include "common/file_version.hpp"
#include "common/posix.hpp"
#include "contract/process_contract.hpp"
#include "contract/template_protocol.hpp"
#include "contract/child_setup.hpp"
#include "worker/fork_for_parent.hpp"
#include "worker/serve.hpp"
#include "worker/started_by_mpify.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <map>

#include <mpify/abi.hpp>

extern char** environ;

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// What each library file was when the template loaded it: a rebuilt file must not be
// served from the old copy.
std::map<std::string, FileVersion> loaded_libraries;

// The process name (as ps shows it) the template had before it called itself
// mpify-template; each worker takes it back, as an exec'd worker would have it.
char program_name[16] = {};

TemplateReply load_library(const std::string& path) {
    struct stat info{};
    if (::stat(path.c_str(), &info) != 0)
        return {TemplateStatus::failed, -1, fmt::format("cannot find {}: {}", path, std::strerror(errno))};
    const FileVersion now = FileVersion::of(info);
    const auto known = loaded_libraries.find(path);
    if (known != loaded_libraries.end()) {
        if (known->second == now) return {};
        return {TemplateStatus::stale_library, -1,
                fmt::format("{} changed on disk since the template loaded it", path)};
    }
    if (::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr)
        return {TemplateStatus::failed, -1, fmt::format("cannot load {}: {}", path, ::dlerror())};
    loaded_libraries.emplace(path, now);
    return {};
}

// The refusal of a template that has more than one thread: a fork would copy only one.
TemplateReply threaded(int threads) {
    return {TemplateStatus::unusable, -1,
            fmt::format("the template has {} threads (started by a static initializer of the program or of a "
                        "library it loaded), and forking a process with threads is unsafe",
                        threads)};
}

// In the forked worker: take the caller's fds and environment, then serve the call as an
// exec'd worker does. Never returns.
[[noreturn]] void become_worker(const ForkRequest& request, const std::vector<UniqueFd>& fds, int devnull) {
    ChildSetup setup;
    setup.sources[0] = devnull;
    setup.sources[1] = fds[1].get();
    setup.sources[2] = fds[2].get();
    setup.sources[worker_channel_fd] = fds[0].get();
    setup.sources[worker_args_fd] = fds.size() > 3 ? fds[3].get() : -1;
    // The parent is the caller (CLONE_PARENT): die with it, unless it is already gone.
    setup.die_with_parent = true;
    setup.parent = request.caller;
    setup.close_others_now = true;  // no exec will close them
    setup.own_process_group = true;  // stopping the rank stops what it started
    if (set_up_worker_child(setup) != 0) ::_exit(127);
    ::prctl(PR_SET_NAME, program_name);
    // Points into `request`, which stays alive: this frame is never left.
    CStringArray variables(request.env);
    environ = variables.data();
    serve_if_worker();
    ::_exit(127);  // serve_if_worker returned: the environment named no channel
}

TemplateReply serve_fork_request(const ForkRequest& request, const std::vector<UniqueFd>& fds, int devnull) {
    if (fds.size() < 3) return {TemplateStatus::failed, -1, "a fork request came without its fds"};
    if (!request.library.empty()) {
        TemplateReply loaded = load_library(request.library);
        if (loaded.status != TemplateStatus::ok) return loaded;
    }
    if (const int threads = thread_count(); threads != 1) return threaded(threads);
    const pid_t pid = fork_for_parent();
    if (pid < 0)
        return {errno == EAGAIN ? TemplateStatus::no_process_slot : TemplateStatus::failed, -1,
                fmt::format("clone failed: {}", std::strerror(errno))};
    if (pid == 0) become_worker(request, fds, devnull);
    return {TemplateStatus::ok, pid, {}};
}

}  // namespace

void serve_if_template() {
    if (std::getenv(template_env_var) == nullptr) return;
    const int control = channel_from_environment(template_env_var);
    const UniqueFd devnull = open_dev_null(O_RDONLY);
    ::prctl(PR_GET_NAME, program_name);
    ::prctl(PR_SET_NAME, "mpify-template");

    TemplateReply ready{TemplateStatus::ok, ::getpid(), {}};
    std::string why_not;
    if (const int threads = thread_count(); threads != 1) ready = threaded(threads);
    else if (const ForkReadiness readiness = prepare_fork_for_parent(why_not); readiness != ForkReadiness::ready)
        // Not now (the caller tries a new template on a later call) or never (exec from now on).
        ready = {readiness == ForkReadiness::never ? TemplateStatus::unusable : TemplateStatus::failed, -1,
                 "probing glibc before forking workers: " + why_not};
    try {
        send_reply(control, ready);
        if (ready.status != TemplateStatus::ok) ::_exit(0);
        for (;;) {
            std::vector<UniqueFd> fds;
            const std::optional<ForkRequest> request = receive_fork_request(control, fds);
            if (!request) ::_exit(0);  // the caller closed its end: it is done, or gone
            send_reply(control, serve_fork_request(*request, fds, devnull.get()));
        }
    } catch (const std::exception&) {
        ::_exit(1);  // the caller is gone mid-message, or spoke nonsense
    }
}

MPIFY_END_DETAIL_NAMESPACE
