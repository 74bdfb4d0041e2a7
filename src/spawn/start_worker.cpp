#include "spawn/start_worker.hpp"

#include "common/clock.hpp"
#include "common/posix.hpp"
#include "spawn/exec_spawner.hpp"
#include "spawn/template_pool.hpp"

#include <mpify/error.hpp>

#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <system_error>

MPIFY_BEGIN_DETAIL_NAMESPACE

Spawner effective_spawner(Spawner requested) {
    const char* chosen = std::getenv("MPIFY_SPAWNER");
    if (chosen == nullptr || *chosen == '\0') return requested;
    const std::string value = chosen;
    if (value == "exec") return Spawner::exec;
    if (value == "template") return Spawner::warm_template;
    throw UsageError(fmt::format("mpify: MPIFY_SPAWNER is '{}'; use exec or template, or unset it", value));
}

StartedWorker start_worker(Spawner spawner, const WorkerHost& host, Relay relay, std::vector<std::string> env,
                           int shared_args_fd, std::optional<Clock::time_point> deadline, int stdin_fd) {
    const SpawnFunction spawn = [&](const LaunchSpec& spec) {
        return spawner == Spawner::exec ? spawn_by_exec(spec) : spawn_from_template(host, spec);
    };
    return start_worker_with(spawn, host, relay, std::move(env), shared_args_fd, deadline, stdin_fd);
}

StartedWorker start_worker_with(const SpawnFunction& spawn, const WorkerHost& host, Relay relay,
                                std::vector<std::string> env, int shared_args_fd,
                                std::optional<Clock::time_point> deadline, int stdin_fd) {
    StartedWorker started;
    // The child's ends: they close when this function returns, once the worker holds them.
    UniqueFd child_channel, child_out, child_err, devnull;
    try {
        int channel[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) != 0)
            throw std::system_error(errno, std::generic_category(), "socketpair");
        started.channel.reset(channel[0]);
        child_channel.reset(channel[1]);
        if (relay != Relay::inherit) {
            Pipe err = make_pipe();
            started.err = std::move(err.read_end);
            child_err = std::move(err.write_end);
        }
        if (relay == Relay::lines) {
            Pipe out = make_pipe();
            started.out = std::move(out.read_end);
            child_out = std::move(out.write_end);
        }
        if (relay == Relay::discard) devnull = open_dev_null(O_WRONLY);
    } catch (const std::system_error& e) {
        throw SpawnError(fmt::format("mpify: cannot create a worker's channel or pipes: {}", e.what()));
    }

    LaunchSpec spec;
    spec.executable = host.executable;
    spec.argv = host.argv;
    spec.env = std::move(env);
    spec.channel_fd = child_channel.get();
    spec.stdout_fd = relay == Relay::discard ? devnull.get() : child_out.get();
    spec.stderr_fd = child_err.get();
    spec.args_fd = shared_args_fd;
    spec.stdin_fd = stdin_fd;
    spec.deadline = deadline;
    spec.own_process_group = true;  // stopping the rank stops what it started
    started.process = spawn(spec);
    return started;
}

MPIFY_END_DETAIL_NAMESPACE
