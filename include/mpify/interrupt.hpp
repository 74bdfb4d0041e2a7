#pragma once
// Stopping a running call from outside it: Ctrl-C, Jupyter's interrupt button, a signal
// handler of the program's own.
//
// request_interrupt() makes every ranch / in_ddp running in this process stop all its
// workers (SIGTERM, then SIGKILL after Options::stop_grace, all reaped) and throw
// mpify::Interrupted once the caller's own rank has returned. The caller's own rank is
// ordinary code on the calling thread and cannot be cut short: in in_ddp it ends through
// its broken collective; a long loop of its own can check interrupt_requested().
//
// By default nothing of this is wired to SIGINT: a program's Ctrl-C keeps its default
// action (the process ends, its workers with it). A program opts in with
// stop_on_sigint(); mpify's Jupyter kernel does the same through the C entry point
// mpify_request_interrupt().
#include <mpify/abi.hpp>
#include <mpify/export.hpp>

MPIFY_BEGIN_NAMESPACE

/// Asks every running call in this process to stop and throw mpify::Interrupted.
/// Async-signal-safe (it only stores an atomic counter and writes to eventfds), thread-
/// safe, and a no-op when no call is running.
MPIFY_API void request_interrupt() noexcept;

/// True while the innermost ranch / in_ddp running on this thread (as the caller's own
/// rank) has been asked to stop; false outside a call. For loops on the caller's rank
/// that should end early when the user interrupts.
MPIFY_API bool interrupt_requested() noexcept;

/// Installs a SIGINT handler: a Ctrl-C while a call runs interrupts the call (it throws
/// mpify::Interrupted); a Ctrl-C while none runs, or a second one during the same call,
/// has SIGINT's default action (the program ends). Call it once, from main, before
/// starting threads; it replaces any SIGINT handler the program had.
MPIFY_API void stop_on_sigint();

namespace detail {

/// True while the innermost ranch / in_ddp running on this thread (as the caller's own
/// rank) is stopping its ranks: interrupted, another rank failed, or the timeout expired.
/// mpify's collectives stop waiting then, rather than wait out the group's timeout for a
/// peer that is gone (a machine that fell silent).
MPIFY_API bool call_stopping() noexcept;

}  // namespace detail

MPIFY_END_NAMESPACE

/// The same as mpify::request_interrupt(), with C linkage so that a host that only
/// dlsym()s it (a Jupyter kernel that does not link mpify) can call it from its SIGINT
/// handler. Async-signal-safe.
extern "C" MPIFY_API void mpify_request_interrupt() noexcept;

/// How many of mpify's interruptible waits (ranch, in_ddp, a rendezvous) are running in
/// this process, on any thread. A host that ends a cell's code from a signal handler
/// (mpify's kernel) must not do so while one runs: the call cleans up after itself and
/// throws mpify::Interrupted instead. Async-signal-safe.
extern "C" MPIFY_API int mpify_calls_running() noexcept;
