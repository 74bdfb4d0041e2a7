#include "worker/fork_for_parent.hpp"

#include "common/posix.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <fmt/format.h>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// glibc's thread descriptor starts at pthread_self(); the thread id sits in its first
// kilobyte in every layout so far (720 bytes in on x86-64 with glibc 2.36).
constexpr std::size_t descriptor_bytes_searched = 1024;

pid_t* thread_id_field = nullptr;
void* robust_list_head = nullptr;
std::size_t robust_list_size = 0;

// Offsets in this thread's descriptor that hold `value`.
std::vector<std::uint32_t> offsets_holding(pid_t value) {
    const char* descriptor = reinterpret_cast<const char*>(::pthread_self());
    std::vector<std::uint32_t> found;
    for (std::size_t offset = 0; offset + sizeof(pid_t) <= descriptor_bytes_searched; offset += alignof(pid_t)) {
        pid_t held;
        std::memcpy(&held, descriptor + offset, sizeof held);
        if (held == value) found.push_back(static_cast<std::uint32_t>(offset));
    }
    return found;
}

}  // namespace

int thread_count() {
    DIR* tasks = ::opendir("/proc/self/task");
    if (tasks == nullptr) return -1;
    int count = 0;
    while (const dirent* entry = ::readdir(tasks))
        if (entry->d_name[0] != '.') ++count;
    ::closedir(tasks);
    return count;
}

ForkReadiness prepare_fork_for_parent(std::string& why_not) {
    if (thread_id_field != nullptr) return ForkReadiness::ready;
    const std::vector<std::uint32_t> candidates = offsets_holding(::gettid());
    if (candidates.empty()) {
        why_not = "glibc's thread descriptor does not hold the thread id where mpify looks for it";
        return ForkReadiness::never;
    }
    // An ordinary fork writes the child's id into the real field: among the candidates,
    // it is the one that holds the child's id in the child.
    Pipe pipe;
    try {
        pipe = make_pipe();
    } catch (const std::system_error& e) {  // out of fds: the next template may fare better
        why_not = e.what();
        return ForkReadiness::try_later;
    }
    const pid_t probe = ::fork();
    if (probe < 0) {  // out of processes or memory, for now
        why_not = fmt::format("fork: {}", std::strerror(errno));
        return ForkReadiness::try_later;
    }
    if (probe == 0) {
        const pid_t child_id = ::gettid();
        const char* descriptor = reinterpret_cast<const char*>(::pthread_self());
        for (std::uint32_t offset : candidates) {
            pid_t held;
            std::memcpy(&held, descriptor + offset, sizeof held);
            if (held == child_id) (void)!::write(pipe.write_end.get(), &offset, sizeof offset);
        }
        ::_exit(0);
    }
    pipe.write_end.reset();
    std::vector<std::uint32_t> moved;
    std::uint32_t offset;
    while (read_exact(pipe.read_end.get(), reinterpret_cast<char*>(&offset), sizeof offset, "mpify: the probe"))
        moved.push_back(offset);
    wait_for_child(probe);
    if (moved.size() != 1) {
        why_not = fmt::format("could not tell glibc's thread-id field apart ({} candidates)", moved.size());
        return ForkReadiness::never;
    }
    thread_id_field = reinterpret_cast<pid_t*>(reinterpret_cast<char*>(::pthread_self()) + moved.front());
    // The kernel forgets a thread's robust-mutex list in a forked child; glibc's fork
    // registers it again, and so must we.
    long size = 0;
    if (::syscall(SYS_get_robust_list, 0, &robust_list_head, &size) == 0)
        robust_list_size = static_cast<std::size_t>(size);
    return ForkReadiness::ready;
}

pid_t fork_for_parent() {
    if (thread_id_field == nullptr) {
        errno = EINVAL;
        return -1;
    }
    // Flags as glibc's fork, plus CLONE_PARENT. No new stack: the child continues on a
    // copy of this one, as after fork().
    const long pid = ::syscall(SYS_clone, CLONE_PARENT | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD, nullptr,
                               nullptr, thread_id_field, nullptr);
    if (pid == 0 && robust_list_head != nullptr) ::syscall(SYS_set_robust_list, robust_list_head, robust_list_size);
    return static_cast<pid_t>(pid);
}

MPIFY_END_DETAIL_NAMESPACE
