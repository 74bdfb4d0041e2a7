#include "worker/forked_worker.hpp"

#include "common/file_version.hpp"
#include "common/posix.hpp"
#include "contract/child_setup.hpp"
#include "contract/process_contract.hpp"
#include "worker/fork_for_parent.hpp"
#include "worker/serve.hpp"

#include <dlfcn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <map>

#include <mpify/abi.hpp>

extern char** environ;

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// A library this process loaded: the file it loaded, and what that file was then.
struct LoadedLibrary {
    std::string path;
    FileVersion version;
};

// The libraries this process loaded, by the caller's name for each (its path on the
// caller's machine): a rebuilt library must not be served from the old copy, and a copy
// of the new build must not be loaded beside the old one, whose functions would stand in
// for the new one's (the same names, loaded first).
std::map<std::string, LoadedLibrary>& loaded_libraries() {
    static std::map<std::string, LoadedLibrary> loaded;
    return loaded;
}

}  // namespace

TemplateReply load_library_for_workers(const std::string& path, const std::string& origin) {
    struct stat info{};
    if (::stat(path.c_str(), &info) != 0)
        return {TemplateStatus::failed, -1, fmt::format("cannot find {}: {}", path, std::strerror(errno))};
    const FileVersion now = FileVersion::of(info);
    const std::string& name = origin.empty() ? path : origin;
    const auto known = loaded_libraries().find(name);
    if (known != loaded_libraries().end()) {
        if (known->second.path == path && known->second.version == now) return {};
        if (known->second.path == path)
            return {TemplateStatus::stale_library, -1,
                    fmt::format("{} changed on disk since the template loaded it", path)};
        return {TemplateStatus::stale_library, -1,
                fmt::format("{} was rebuilt since the template loaded its copy {} (the new build's copy is {})", name,
                            known->second.path, path)};
    }
    if (::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr)
        return {TemplateStatus::failed, -1, fmt::format("cannot load {}: {}", path, ::dlerror())};
    loaded_libraries().emplace(name, LoadedLibrary{path, now});
    return {};
}

std::size_t loaded_library_count() { return loaded_libraries().size(); }

TemplateReply ready_to_fork(const ForkRequest& request) {
    if (!request.library.empty()) {
        TemplateReply loaded = load_library_for_workers(request.library, request.library_origin);
        if (loaded.status != TemplateStatus::ok) return loaded;
    }
    if (const int threads = thread_count(); threads != 1)
        return {TemplateStatus::unusable, -1,
                fmt::format("the template has {} threads (started by a static initializer of the program or of a "
                            "library it loaded), and forking a process with threads is unsafe",
                            threads)};
    return {};
}

void become_worker(const ForkRequest& request, const std::vector<UniqueFd>& fds, int devnull, pid_t parent,
                   const char* name) {
    ChildSetup setup;
    setup.sources[0] = devnull;
    setup.sources[1] = fds[1].get();
    setup.sources[2] = fds[2].get();
    setup.sources[worker_channel_fd] = fds[0].get();
    setup.sources[worker_args_fd] = fds.size() > 3 ? fds[3].get() : -1;
    setup.die_with_parent = true;
    setup.parent = parent;
    setup.close_others_now = true;  // no exec will close them
    setup.own_process_group = true;  // stopping the rank stops what it started
    if (set_up_worker_child(setup) != 0) ::_exit(127);
    // Whoever asked for it reads its stacks (mpify-stacks runs as that one's child), where
    // that is not the parent: an agent on a node (Yama's ptrace_scope 1 needs the leave).
    if (request.caller != parent) ::prctl(PR_SET_PTRACER, static_cast<unsigned long>(request.caller), 0, 0, 0);
    ::prctl(PR_SET_NAME, name);
    // Points into `request`, which stays alive: this frame is never left.
    CStringArray variables(request.env);
    environ = variables.data();
    serve_if_worker();
    ::_exit(127);  // serve_if_worker returned: the environment named no channel
}

MPIFY_END_DETAIL_NAMESPACE
