#pragma once
// Signals and the session: the kernel process runs the user's code, so an interrupt or
// a crash in that code must end the cell, not the kernel (and every model it holds).
//
// Interrupt (Jupyter sends SIGINT): mpify's running call, if any, is told first (it
// stops its workers and throws mpify::Interrupted). Code compiled from the cells is left
// at once (a longjmp back to the engine) when the signal finds it running; a cell
// waiting in a sleeping system call (sleep, read, poll) is left from there. Anywhere else
// (inside LibTorch, in malloc, inside an mpify call) leaving could break the library
// that was interrupted, so the kernel looks again every 20 ms until the cell is back in
// its own code, or ends.
//
// Crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) on the thread that runs cells while a
// cell runs: the cell ends with an error naming the signal and where it happened; the
// session goes on. Elsewhere, the kernel dies as before.
//
// A forked pre-check child (forked_check.hpp) that crashes sends its last words (clang's
// diagnostics so far) to its parent instead.
#include <functional>
#include <string>

namespace mpify_kernel {

/// Installs the handlers, an alternate signal stack for the calling thread (a runaway
/// recursion in a cell must still reach the handler) and blocks SIGINT on it, so that
/// the threads started next never take it. Call first in main, on the thread that will
/// run the cells.
void install_signal_handlers();

/// Looks up mpify's entry points again (a cell may have loaded libmpify). Call before
/// each cell.
void prepare_cell_for_interrupts();

/// How a guarded run ended.
struct GuardedEnd {
    enum class Kind { finished, interrupted, crashed };
    Kind kind = Kind::finished;
    int signal = 0;
    std::string where;  ///< for a crash: "in code compiled from the cells", or the library's name
};

/// Runs `code` (the cell's compiled code) with SIGINT unblocked, so that an interrupt or
/// a crash inside it ends the run instead of the process. Exceptions pass through.
GuardedEnd run_guarded(const std::function<void()>& code);

/// Runs `wait` with SIGINT unblocked (a blocking call returns EINTR on interrupt).
void run_interruptible(const std::function<void()>& wait);

/// True once an interrupt has arrived since the current cell began.
bool interrupt_requested_in_cell();

/// A cell begins: forgets an earlier cell's interrupt.
void begin_cell_signals();

/// In a forked child: a crash writes 'C', then `*last_words`, to `fd` and exits.
void report_crashes_to(int fd, const std::string* last_words);

}  // namespace mpify_kernel
