#include "spawn/template_client.hpp"

#include "common/clock.hpp"
#include "common/poll_set.hpp"
#include "common/posix.hpp"
#include "contract/process_contract.hpp"
#include "spawn/exec_spawner.hpp"
#include "spawn/lasting_thread.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <system_error>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Start-up loads LibTorch: under a second on an idle machine, many seconds under a
// sanitizer or on a loaded one. A template that has not started after this long is given
// up on.
constexpr std::chrono::seconds start_limit{120};

using Kind = TemplateUnavailable::Kind;

}  // namespace

WarmTemplate::WarmTemplate(const WorkerHost& host, std::vector<std::string> env,
                           std::optional<Clock::time_point> deadline) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        throw TemplateUnavailable(Kind::this_call, fmt::format("socketpair: {}", std::strerror(errno)));
    control_.reset(pair[0]);
    UniqueFd template_end(pair[1]);
    UniqueFd devnull;
    try {
        devnull = open_dev_null(O_WRONLY);
    } catch (const std::system_error& e) {
        throw TemplateUnavailable(Kind::this_call, e.what());
    }

    env.push_back(fmt::format("{}={}", template_env_var, worker_channel_fd));
    LaunchSpec spec;
    spec.executable = host.executable;
    spec.argv = host.argv;
    spec.env = std::move(env);
    spec.stdout_fd = devnull.get();  // stderr stays the caller's: the template's own troubles show there
    spec.channel_fd = template_end.get();
    spec.die_with_caller_thread = false;  // it ends when control_ closes, whichever thread made it
    // Not from this thread, which may end before the template does (lasting_thread.hpp).
    try {
        run_on_lasting_thread([&] { process_ = spawn_by_exec(spec); });
    } catch (const std::system_error& e) {  // no thread to start it from: exec this call's workers
        throw TemplateUnavailable(Kind::this_call, fmt::format("cannot start a thread: {}", e.what()));
    }
    template_end.reset();
    try {
        const TemplateReply ready = await_reply("to start", start_limit, deadline);
        if (ready.status != TemplateStatus::ok)
            throw TemplateUnavailable(ready.status == TemplateStatus::unusable ? Kind::unusable : Kind::this_call,
                                      ready.message);
    } catch (...) {
        stop();
        throw;
    }
}

WarmTemplate::~WarmTemplate() { stop(); }

void WarmTemplate::stop() noexcept {
    control_.reset();
    if (process_.pid <= 0) return;
    kill_and_reap(process_.pid, process_.pidfd.get());
    process_.pid = -1;
    process_.pidfd.reset();
}

void WarmTemplate::abandon() {
    control_.reset();
    process_.pidfd.reset();
    process_.pid = -1;
}

bool WarmTemplate::alive() const {
    if (process_.pid <= 0) return false;
    pollfd exited{process_.pidfd.get(), POLLIN, 0};
    return ::poll(&exited, 1, 0) == 0;
}

TemplateReply WarmTemplate::await_reply(const char* waiting_for, std::chrono::seconds limit,
                                        std::optional<Clock::time_point> call_deadline) {
    const auto started = Clock::now();
    const auto deadline = std::min(started + limit, call_deadline.value_or(started + limit));
    PollSet fds;
    fds.add(control_.get(), POLLIN);
    fds.add(process_.pidfd.get(), POLLIN);
    for (;;) {
        int ready = -1;
        try {
            ready = fds.wait(deadline);
        } catch (const std::system_error&) {  // cannot wait on it: as good as gone
        }
        if (ready == 0 && Clock::now() < deadline) continue;  // a signal woke it
        if (ready == 0) {
            const double waited = std::chrono::duration<double>(Clock::now() - started).count();
            throw TemplateUnavailable(
                Kind::silent,
                fmt::format("the warm template (pid {}) did not answer within {:.1f} s, waiting for it {} "
                            "(stopped, e.g. by SIGSTOP, or stuck); it was killed",
                            process_.pid, waited, waiting_for));
        }
        // A reply sent just before the template died is still worth reading.
        if (ready > 0 && (fds.revents(0) & POLLIN)) {
            try {
                return receive_reply(control_.get());
            } catch (const std::exception& e) {
                throw TemplateUnavailable(Kind::gone, fmt::format("the template is gone ({})", e.what()));
            }
        }
        if (ready < 0 || fds.revents(0) != 0 || fds.revents(1) != 0)
            throw TemplateUnavailable(Kind::gone, fmt::format("the template exited (waiting for it {})", waiting_for));
    }
}

ChildProcess WarmTemplate::request_worker(const LaunchSpec& spec, const std::string& library) {
    ForkRequest request;
    request.caller = ::getpid();
    request.library = library;
    request.env = spec.env;
    // A worker that inherits the caller's output gets the caller's fds as they are now.
    std::vector<int> fds{spec.channel_fd, spec.stdout_fd >= 0 ? spec.stdout_fd : STDOUT_FILENO,
                         spec.stderr_fd >= 0 ? spec.stderr_fd : STDERR_FILENO};
    if (spec.args_fd >= 0) fds.push_back(spec.args_fd);
    try {
        send_fork_request(control_.get(), request, fds);
    } catch (const std::system_error& e) {
        if (e.code().value() == EMSGSIZE)
            throw TemplateUnavailable(Kind::this_call, "the worker's environment is too large for one message");
        throw TemplateUnavailable(Kind::gone, fmt::format("the template is gone ({})", e.what()));
    }
    const TemplateReply reply = await_reply("to fork a worker", fork_answer_limit, spec.deadline);
    switch (reply.status) {
        case TemplateStatus::ok: break;
        case TemplateStatus::stale_library: throw TemplateUnavailable(Kind::stale, reply.message);
        case TemplateStatus::unusable: throw TemplateUnavailable(Kind::unusable, reply.message);
        case TemplateStatus::no_process_slot: throw TemplateUnavailable(Kind::crowding, reply.message);
        default: throw TemplateUnavailable(Kind::this_call, reply.message);
    }
    return adopt_child(static_cast<pid_t>(reply.pid));  // forked as our own child
}

MPIFY_END_DETAIL_NAMESPACE
