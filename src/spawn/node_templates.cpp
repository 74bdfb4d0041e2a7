#include "spawn/node_templates.hpp"

#include "common/debug_log.hpp"
#include "common/posix.hpp"
#include "spawn/lasting_thread.hpp"
#include "spawn/start_worker.hpp"

#include <mpify/error.hpp>
#include <mpify/placement.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <system_error>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// How long a template's launcher has to end once its stdin closed, before it is stopped.
constexpr std::chrono::milliseconds template_farewell{2000};

struct Registry {
    std::mutex mutex;
    pid_t owner = ::getpid();  // a forked copy of the caller starts its own
    std::map<std::string, std::shared_ptr<NodeTemplate>> by_command;

    // Under the lock.
    void forget_others() {
        if (owner == ::getpid()) return;
        for (auto& [command, node] : by_command) node->launcher->reaped = true;  // the original's children
        by_command.clear();
        owner = ::getpid();
    }
};

// Never destroyed: when the caller exits, the kernel closes the templates' stdin and
// each template, reading its end, exits.
Registry& registry() {
    static Registry* all = new Registry;
    return *all;
}

void end_template(NodeTemplate& node) noexcept {
    node.requests.reset();  // its end of input: it exits, its launcher with it
    node.launcher->stop(template_farewell);
}

}  // namespace

bool uses_node_templates(const Placement& placement) {
    return placement.template_idle.count() > 0 && effective_spawner(Spawner::warm_template) == Spawner::warm_template;
}

std::shared_ptr<NodeTemplate> node_template(const std::string& command) {
    Registry& all = registry();
    std::lock_guard lock(all.mutex);
    all.forget_others();
    auto known = all.by_command.find(command);
    if (known != all.by_command.end()) {
        if (!known->second->launcher->ended()) return known->second;
        known->second->launcher->reap();
        debug_line(fmt::format("node template ended ({}): {}", known->second->launcher->command,
                               known->second->launcher->tail));
        all.by_command.erase(known);
    }
    auto node = std::make_shared<NodeTemplate>();
    try {
        // A socket, not a pipe: a template gone is EPIPE to write (MSG_NOSIGNAL), never SIGPIPE.
        int pair[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
            throw std::system_error(errno, std::generic_category(), "socketpair");
        UniqueFd ours(pair[0]), its(pair[1]);
        // From the lasting thread: its PDEATHSIG must not fire when a call's thread ends.
        run_on_lasting_thread([&] { node->launcher = start_launcher(command, its.get()); });
        node->requests = std::move(ours);
        set_blocking(node->requests.get(), false);
    } catch (const std::system_error& e) {
        throw SpawnError(fmt::format("mpify: cannot start a node template: {}: {}", command, e.what()));
    }
    debug_line(fmt::format("node template started: {}", command));
    all.by_command.emplace(command, node);
    return node;
}

bool ask_for_agent(NodeTemplate& node, const AgentRequest& request) {
    const std::string line = format_agent_request(request);
    if (!node.requests || node.launcher->ended()) return false;
    try {
        write_all(node.requests.get(), line.data(), line.size(), "mpify: a node template's stdin");
        return true;
    } catch (const std::system_error&) {  // gone (EPIPE), or not reading (EAGAIN)
        return false;
    }
}

void discard_node_template(const std::string& command) noexcept {
    std::shared_ptr<NodeTemplate> node;
    {
        Registry& all = registry();
        std::lock_guard lock(all.mutex);
        auto known = all.by_command.find(command);
        if (known == all.by_command.end()) return;
        node = std::move(known->second);
        all.by_command.erase(known);
    }
    end_template(*node);
}

MPIFY_END_DETAIL_NAMESPACE

MPIFY_BEGIN_NAMESPACE

void stop_node_templates() noexcept {
    std::map<std::string, std::shared_ptr<detail::NodeTemplate>> ending;
    {
        detail::Registry& all = detail::registry();
        std::lock_guard lock(all.mutex);
        all.forget_others();
        ending.swap(all.by_command);
    }
    for (auto& [command, node] : ending) detail::end_template(*node);
}

MPIFY_END_NAMESPACE
