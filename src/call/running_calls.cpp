#include "call/running_calls.hpp"

#include "call/supervisor.hpp"

#include <mpify/stack.hpp>

#include <algorithm>
#include <mutex>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

std::mutex calls_lock;
std::vector<const Supervisor*>& calls() {
    static std::vector<const Supervisor*> listed;  // not destroyed before a late call's supervisor
    return listed;
}

}  // namespace

void list_running_call(const Supervisor* call) {
    const std::lock_guard<std::mutex> lock(calls_lock);
    calls().push_back(call);
}

void unlist_running_call(const Supervisor* call) noexcept {
    const std::lock_guard<std::mutex> lock(calls_lock);
    calls().erase(std::remove(calls().begin(), calls().end(), call), calls().end());
}

std::vector<StackTarget> ranks_of_running_calls() {
    const std::lock_guard<std::mutex> lock(calls_lock);
    std::vector<StackTarget> ranks;
    for (const Supervisor* call : calls()) {
        std::vector<StackTarget> running = call->running_ranks();
        ranks.insert(ranks.end(), running.begin(), running.end());
    }
    return ranks;
}

MPIFY_END_DETAIL_NAMESPACE

MPIFY_BEGIN_NAMESPACE

std::vector<RankStack> where() {
    return detail::collect_stacks(detail::ranks_of_running_calls(), detail::stack_collection_limit);
}

MPIFY_END_NAMESPACE
