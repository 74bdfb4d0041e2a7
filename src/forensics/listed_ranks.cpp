#include "forensics/listed_ranks.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include <mpify/stack.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

std::mutex calls_lock;
std::vector<const ListedRanks*>& calls() {
    static std::vector<const ListedRanks*> listed;  // made at the first listing: destroyed after its lister
    return listed;
}

}  // namespace

ListedRanks::ListedRanks() {
    const std::lock_guard<std::mutex> lock(calls_lock);
    calls().push_back(this);
}

ListedRanks::~ListedRanks() {
    const std::lock_guard<std::mutex> lock(calls_lock);
    calls().erase(std::remove(calls().begin(), calls().end(), this), calls().end());
}

void ListedRanks::set_workers(std::vector<Worker> workers) {
    const std::lock_guard<std::mutex> lock(lock_);
    workers_ = std::move(workers);
}

void ListedRanks::own_rank_started(int rank, pid_t tid) noexcept {
    const std::lock_guard<std::mutex> lock(lock_);
    own_rank_ = StackTarget{rank, {}, ::getpid(), tid, {}, nullptr};
}

void ListedRanks::own_rank_ended() noexcept {
    const std::lock_guard<std::mutex> lock(lock_);
    own_rank_.reset();
}

std::optional<int> ListedRanks::own_rank() const {
    const std::lock_guard<std::mutex> lock(lock_);
    return own_rank_ ? std::optional<int>(own_rank_->rank) : std::nullopt;
}

std::vector<StackTarget> ListedRanks::targets() const {
    const std::lock_guard<std::mutex> lock(lock_);
    std::vector<StackTarget> running;
    for (const Worker& listed : workers_) {
        StackTarget target = listed.target;
        // A remote rank is read on its machine, asked through its stand-in: a copy of the
        // socket, so that the reading may outlast the call.
        if (listed.control_fd >= 0) {
            const int copy = ::fcntl(listed.control_fd, F_DUPFD_CLOEXEC, 0);
            if (copy >= 0) target.control = std::make_shared<UniqueFd>(copy);
            else target.unreadable = "not read: no fd left to ask its stand-in";
        }
        running.push_back(std::move(target));
    }
    if (own_rank_) running.push_back(*own_rank_);
    std::sort(running.begin(), running.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    return running;
}

std::vector<StackTarget> ranks_of_running_calls() {
    const std::lock_guard<std::mutex> lock(calls_lock);
    std::vector<StackTarget> ranks;
    for (const ListedRanks* call : calls()) {
        std::vector<StackTarget> running = call->targets();
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
