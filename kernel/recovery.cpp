#include "recovery.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <thread>

namespace mpify_kernel {
namespace {

using MpifyInterrupt = void (*)();
using MpifyCallsRunning = int (*)();
std::atomic<MpifyInterrupt> mpify_interrupt{nullptr};
std::atomic<MpifyCallsRunning> mpify_calls_running{nullptr};

const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
// Sent by the sampler to the cell thread: "look where the cell is now".
int sample_signal() { return SIGRTMIN + 3; }

pthread_t cell_thread;
sigjmp_buf guarded_return;
std::atomic<bool> guarded_active{false};
std::atomic<bool> interrupted{false};
std::atomic<int> caught_signal{0};
std::atomic<std::uintptr_t> caught_at{0};
sem_t sampler_wakeup;

// A forked pre-check child's channel to its parent (report_crashes_to).
std::atomic<int> child_report_fd{-1};
const std::string* child_last_words = nullptr;

sigset_t only(int signal) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signal);
    return set;
}

std::uintptr_t interrupted_pc(void* context) {
    return static_cast<std::uintptr_t>(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]);
}

// True when leaving the cell from where the signal found it cannot break a library:
// code compiled from the cells (it lies in no loaded object), or a system call that only
// sleeps. dladdr is not on POSIX's list of async-signal-safe functions, but glibc's
// takes a recursive lock and allocates nothing; a signal handler that might deadlock
// there would find another thread inside dlopen, which returns on its own.
bool safe_to_leave(std::uintptr_t pc) {
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(pc), &info) == 0) return true;
    if (info.dli_sname == nullptr || pc - reinterpret_cast<std::uintptr_t>(info.dli_saddr) > 1024) return false;
    static const std::array<const char*, 14> sleeping = {
        "nanosleep", "clock_nanosleep", "__nanosleep", "usleep", "sleep",      "pause",      "poll",
        "ppoll",     "select",          "pselect",     "read",   "epoll_wait", "sigsuspend", "sigtimedwait"};
    for (const char* name : sleeping)
        if (std::strcmp(info.dli_sname, name) == 0) return true;
    return false;
}

// Inside an mpify call the call itself ends the cell (it throws mpify::Interrupted once
// its workers are stopped); a libmpify too old to say is taken to be in one.
bool inside_mpify_call() {
    const MpifyCallsRunning running = mpify_calls_running.load();
    return running != nullptr ? running() > 0 : mpify_interrupt.load() != nullptr;
}

void leave_cell_if_safe(void* context) {
    if (!guarded_active.load() || !pthread_equal(pthread_self(), cell_thread)) return;
    if (inside_mpify_call()) return;
    if (!safe_to_leave(interrupted_pc(context))) return;
    caught_signal.store(SIGINT);
    siglongjmp(guarded_return, 1);
}

void on_sigint(int, siginfo_t*, void* context) {
    // The first thing: mpify's own async-signal-safe entry point stops a running call.
    if (MpifyInterrupt interrupt = mpify_interrupt.load()) interrupt();
    interrupted.store(true);
    leave_cell_if_safe(context);
    ::sem_post(&sampler_wakeup);  // not left yet: look again from the sampler
}

void on_sample(int, siginfo_t*, void* context) {
    if (interrupted.load()) leave_cell_if_safe(context);
}

void on_crash(int signal, siginfo_t*, void* context) {
    if (const int fd = child_report_fd.load(); fd >= 0) {
        // A pre-check child: its last words are what clang said before it crashed.
        ssize_t ignored = ::write(fd, "C", 1);
        if (child_last_words != nullptr) ignored = ::write(fd, child_last_words->data(), child_last_words->size());
        (void)ignored;
        ::_exit(128 + signal);
    }
    if (guarded_active.load() && pthread_equal(pthread_self(), cell_thread)) {
        caught_signal.store(signal);
        caught_at.store(interrupted_pc(context));
        siglongjmp(guarded_return, 1);
    }
    // Not the cell's: the default action, as if no handler had been installed.
    ::signal(signal, SIG_DFL);
    const sigset_t set = only(signal);
    ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(signal);
}

// While an interrupt waits for the cell to come back to its own code: a look every 20 ms.
void sample_until_left() {
    while (true) {
        while (::sem_wait(&sampler_wakeup) != 0) {
        }
        while (interrupted.load() && guarded_active.load()) {
            // Not while an mpify call runs: it ends the cell itself, and a signal every
            // 20 ms would only cut its waits (and its libraries') short with EINTR.
            if (!inside_mpify_call()) ::pthread_kill(cell_thread, sample_signal());
            const timespec pause{0, 20 * 1000 * 1000};
            ::nanosleep(&pause, nullptr);
        }
    }
}

void install(int signal, void (*handler)(int, siginfo_t*, void*), int flags) {
    struct sigaction action{};
    action.sa_sigaction = handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | flags;
    ::sigaction(signal, &action, nullptr);
}

void set_sigint_blocked(bool blocked) {
    const sigset_t set = only(SIGINT);
    ::pthread_sigmask(blocked ? SIG_BLOCK : SIG_UNBLOCK, &set, nullptr);
}

}  // namespace

void install_signal_handlers() {
    cell_thread = pthread_self();
    static std::array<char, 256 * 1024> alternate_stack;
    stack_t stack{};
    stack.ss_sp = alternate_stack.data();
    stack.ss_size = alternate_stack.size();
    ::sigaltstack(&stack, nullptr);
    // No SA_RESTART for SIGINT: a cell's blocking read or sleep returns EINTR.
    install(SIGINT, on_sigint, SA_ONSTACK);
    install(sample_signal(), on_sample, SA_ONSTACK | SA_RESTART);
    for (int signal : crash_signals) install(signal, on_crash, SA_ONSTACK | SA_NODEFER);
    set_sigint_blocked(true);
    ::sem_init(&sampler_wakeup, 0, 0);
    sigset_t all;
    sigfillset(&all);
    sigset_t previous;
    ::pthread_sigmask(SIG_BLOCK, &all, &previous);  // the sampler takes no signal
    std::thread(sample_until_left).detach();
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

void prepare_cell_for_interrupts() {
    mpify_interrupt.store(reinterpret_cast<MpifyInterrupt>(::dlsym(RTLD_DEFAULT, "mpify_request_interrupt")));
    mpify_calls_running.store(reinterpret_cast<MpifyCallsRunning>(::dlsym(RTLD_DEFAULT, "mpify_calls_running")));
}

void begin_cell_signals() { interrupted.store(false); }

bool interrupt_requested_in_cell() { return interrupted.load(); }

GuardedEnd run_guarded(const std::function<void()>& code) {
    // The signal mask is saved here (SIGINT blocked) and restored by the jump.
    if (sigsetjmp(guarded_return, 1) == 0) {
        guarded_active.store(true);
        set_sigint_blocked(false);
        try {
            code();
        } catch (...) {  // the cell's exception: the engine reports it
            set_sigint_blocked(true);
            guarded_active.store(false);
            throw;
        }
        set_sigint_blocked(true);
        guarded_active.store(false);
        return {};
    }
    guarded_active.store(false);
    GuardedEnd end;
    end.signal = caught_signal.exchange(0);
    end.kind = end.signal == SIGINT ? GuardedEnd::Kind::interrupted : GuardedEnd::Kind::crashed;
    if (end.kind == GuardedEnd::Kind::crashed) {
        Dl_info info{};
        const auto pc = reinterpret_cast<void*>(caught_at.exchange(0));
        end.where = ::dladdr(pc, &info) != 0 && info.dli_fname != nullptr ? std::string("in ") + info.dli_fname
                                                                          : "in code compiled from the cells";
        if (info.dli_sname != nullptr) end.where += std::string(" (") + info.dli_sname + ")";
        // SA_NODEFER above: the jump left the handler without unblocking anything.
    }
    return end;
}

void run_interruptible(const std::function<void()>& wait) {
    set_sigint_blocked(false);
    try {
        wait();
    } catch (...) {
        set_sigint_blocked(true);
        throw;
    }
    set_sigint_blocked(true);
}

void report_crashes_to(int fd, const std::string* last_words) {
    child_last_words = last_words;
    child_report_fd.store(fd);
    ::signal(SIGINT, SIG_IGN);  // the parent decides: it kills the child on interrupt
}

}  // namespace mpify_kernel
