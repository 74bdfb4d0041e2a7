#include "worker/template_server.hpp"

#include "common/posix.hpp"
#include "contract/process_contract.hpp"
#include "contract/template_protocol.hpp"
#include "worker/fork_for_parent.hpp"
#include "worker/forked_worker.hpp"
#include "worker/started_by_mpify.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// The process name (as ps shows it) the template had before it called itself
// mpify-template; each worker takes it back, as an exec'd worker would have it.
char program_name[16] = {};

TemplateReply serve_fork_request(const ForkRequest& request, const std::vector<UniqueFd>& fds, int devnull) {
    if (fds.size() < 3) return {TemplateStatus::failed, -1, "a fork request came without its fds"};
    if (TemplateReply ready = ready_to_fork(request); ready.status != TemplateStatus::ok) return ready;
    const pid_t pid = fork_for_parent();
    if (pid < 0)
        return {errno == EAGAIN ? TemplateStatus::no_process_slot : TemplateStatus::failed, -1,
                fmt::format("clone failed: {}", std::strerror(errno))};
    // The parent is the caller (CLONE_PARENT): the worker dies with it.
    if (pid == 0) become_worker(request, fds, devnull, request.caller, program_name);
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
    if (const TemplateReply alone = ready_to_fork({}); alone.status != TemplateStatus::ok) ready = alone;
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
