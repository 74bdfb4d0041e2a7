#pragma once
// The caller's handle on one warm template process (worker/template_server.hpp is the other side):
// starts it by exec, asks it to fork workers, and stops it.
#include "common/clock.hpp"
#include "common/unique_fd.hpp"
#include "contract/template_protocol.hpp"
#include "spawn/child_process.hpp"
#include "spawn/worker_host.hpp"

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Why a template could not start a worker. The spawner decides what comes next.
class TemplateUnavailable : public std::runtime_error {
public:
    enum class Kind {
        gone,       ///< the template died: a new one may do
        stale,      ///< a library changed on disk: a new template loads it fresh
        unusable,   ///< it can never fork safely (threads): use exec for this host
        this_call,  ///< this request failed (too large an environment...): exec this worker
        silent,     ///< no answer in time (stopped, stuck): it is killed; exec this call's workers
        crowding,   ///< no process slot for the fork: the template's own is given back for an exec
    };
    TemplateUnavailable(Kind kind, const std::string& reason) : std::runtime_error(reason), kind_(kind) {}
    Kind kind() const { return kind_; }

private:
    Kind kind_;
};

class WarmTemplate {
public:
    /// Starts the template of `host` by exec with environment `env`, and waits until it
    /// is ready, until `deadline` at most. Throws TemplateUnavailable (or SpawnError when
    /// exec itself fails).
    WarmTemplate(const WorkerHost& host, std::vector<std::string> env, std::optional<Clock::time_point> deadline);
    /// Closes the control socket and reaps the template (killing it if need be).
    ~WarmTemplate();
    WarmTemplate(const WarmTemplate&) = delete;
    WarmTemplate& operator=(const WarmTemplate&) = delete;

    /// Has the template fork one worker, the caller's child, with the fds and environment
    /// of `spec`, after loading `library` (if not empty); waits for its answer until
    /// spec.deadline, and fork_answer_limit at most. Throws TemplateUnavailable.
    ChildProcess request_worker(const LaunchSpec& spec, const std::string& library);

    /// False once the template has exited (crashed, or killed).
    bool alive() const;

    pid_t pid() const { return process_.pid; }

    /// Drops the template without signalling or reaping it: for a forked copy of the
    /// caller, whose template belongs to the original.
    void abandon();

    /// The longest wait for a worker forked (and its library loaded) by the template: it
    /// takes milliseconds; a template that has not answered by then is stopped or stuck.
    static constexpr std::chrono::seconds fork_answer_limit{20};

private:
    /// The template's next reply, awaited for `limit` and until `deadline` at most;
    /// throws TemplateUnavailable: `gone` if it dies first, `silent` if it says nothing.
    TemplateReply await_reply(const char* waiting_for, std::chrono::seconds limit,
                              std::optional<Clock::time_point> deadline);
    /// Closes the socket, kills and reaps the template.
    void stop() noexcept;
    ChildProcess process_;
    UniqueFd control_;
};

MPIFY_END_DETAIL_NAMESPACE
