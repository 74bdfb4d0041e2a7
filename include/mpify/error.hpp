#pragma once
// The errors mpify throws. Every one is an mpify::Error; the subclasses tell apart
// "you called it wrong" (nothing was started), "a worker could not be started" and
// "one or more ranks failed" (with the details of each failed rank).
#include <mpify/abi.hpp>
#include <mpify/export.hpp>
#include <mpify/stack.hpp>

#include <stdexcept>
#include <string>
#include <vector>

MPIFY_BEGIN_NAMESPACE

/// Base of every error mpify throws; `what()` is a complete, human-readable message.
class MPIFY_API Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Bad input detected before anything was spawned (bad n, unregistered function, ...).
class MPIFY_API UsageError : public Error {
public:
    using Error::Error;
};

/// A worker process could not be started (mpify-worker missing, exec failed, ...).
/// Workers already started were stopped and reaped before this is thrown.
class MPIFY_API SpawnError : public Error {
public:
    using Error::Error;
};

/// How one rank failed. `describe()` renders it the way `WorkerError::what()` shows it.
struct MPIFY_API RankFailure {
    /// What went wrong with the rank.
    enum class Kind {
        threw,      ///< fn (or the context) threw; exception_type and message are set
        signaled,   ///< the process was killed by `signal`
        exited,     ///< the process exited with `exit_code` without returning a result
        timed_out,  ///< still running when Options::timeout expired
        protocol,   ///< the worker broke the channel protocol (a bug, or fn closed fd 3)
        /// the process ended without a result, but something else in the caller reaped it
        /// (a SIGCHLD handler calling waitpid(-1, ...)), so how it ended is unknown
        reaped_elsewhere,
        /// the rank returned, but the caller could not read its result (`message` says
        /// why; the exception is nested in the WorkerError)
        unreadable_result,
        /// a rank on another machine (Options::placement) was lost: its connection to the
        /// caller closed before the rank ended, or fell silent for 3 s — the machine, its
        /// agent or the network between went away (`message` says which). With
        /// Options::min_ranks, a restart leaves that machine out.
        lost,
    };
    int rank = -1;                         ///< global rank within the ranch call
    /// The machine the rank ran on, when another than the caller's (Options::placement);
    /// empty for ranks on the caller's machine.
    std::string host;
    Kind kind = Kind::threw;               ///< what happened
    std::string exception_type;            ///< demangled type of the exception (threw)
    std::string message;                   ///< what() of the exception, or a description
    int signal = 0;                        ///< signal number (signaled)
    int exit_code = 0;                     ///< exit status (exited)
    std::vector<std::string> stderr_tail;  ///< last lines the rank wrote to stderr
    /// The attempt of a call with Options::restarts that the failure ended: 0 the first,
    /// k the k-th restart. Always 0 without restarts.
    int attempt = 0;
    /// Where the rank was when the call gave up on it while it still ran: at the
    /// timeout, or when another rank failed first (Options::stacks). Empty `threads` when
    /// it was not running then (it threw, it died) or stacks were not read.
    RankStack stack;
    /// One line, without the stderr tail: "rank 2 was killed by SIGSEGV (Segmentation
    /// fault)"; a rank on another machine is "rank 2 on node1". What the rank said comes
    /// with its control characters written out ("\x1b"), as in WorkerError::what().
    std::string headline() const;
    /// One paragraph: the headline, where the rank was (RankStack::summary) when its
    /// stack was read, then the last lines of the rank's stderr.
    std::string describe() const;
};

/// One or more ranks failed. `what()` names every failed rank with its reason;
/// `failures()` gives them one by one, in the order they happened (the first is
/// usually the cause, later ones its consequences). After Options::restarts ran out,
/// they are every attempt's failures, attempt by attempt (RankFailure::attempt).
class MPIFY_API WorkerError : public Error {
public:
    /// Builds the error; `context` is the first line ("mpify::ranch(train, n=4): ...").
    /// `stacks`: where the ranks still running were when the call began to stop them.
    WorkerError(const std::string& context, std::vector<RankFailure> failures, std::vector<RankStack> stacks = {});
    /// The failed ranks, first failure first.
    const std::vector<RankFailure>& failures() const noexcept { return failures_; }
    /// Where each rank still running was when the first failure (or the timeout) made the
    /// call stop them, by rank (Options::stacks): the failed ranks' stacks are also in
    /// their RankFailure::stack; a rank the call stopped has no failure, only this.
    const std::vector<RankStack>& stacks() const noexcept { return stacks_; }

private:
    std::vector<RankFailure> failures_;
    std::vector<RankStack> stacks_;
};

/// Options::timeout expired; `failures()` lists the ranks that were still running.
class MPIFY_API TimeoutError : public WorkerError {
public:
    using WorkerError::WorkerError;
};

/// The call was interrupted (mpify::request_interrupt(): Ctrl-C after
/// mpify::stop_on_sigint(), Jupyter's interrupt button). Every worker was stopped and
/// reaped. If the caller's own rank threw on its way out (its collective broke), that
/// exception is nested (std::rethrow_if_nested).
class MPIFY_API Interrupted : public Error {
public:
    using Error::Error;
    /// `what()` is `message`, then a line per rank saying where it was.
    Interrupted(const std::string& message, std::vector<RankStack> stacks);
    /// Where each rank still running was when the interrupt came (Options::stacks),
    /// by rank; empty when none ran or stacks were not read.
    const std::vector<RankStack>& stacks() const noexcept { return stacks_; }

private:
    std::vector<RankStack> stacks_;
};

MPIFY_END_NAMESPACE
