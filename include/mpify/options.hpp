#pragma once
// mpify::Options: how a ranch call starts, supervises and reports its ranks.
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <mpify/abi.hpp>
#include <mpify/placement.hpp>

MPIFY_BEGIN_NAMESPACE

/// Which of a worker's two output streams a line came from.
enum class Stream { out, err };

/// What happens to the workers' stdout and stderr.
enum class Relay {
    /// Line by line to the caller's std::cout / std::cerr, each line prefixed "[rank k] ".
    /// Works in notebooks, which capture the caller's streams. The default. A stream that
    /// does not take the lines (a pipe nobody reads) never blocks the call: up to 1 MiB
    /// waits, then the workers are slowed (timeouts and interrupts still hold); what is
    /// left at the end of the call is dropped after at most 5 s without progress (or at
    /// the timeout), with a note on stderr saying how much.
    lines,
    /// The workers write straight to the caller's file descriptors 1 and 2: no prefix,
    /// no extra copy, but a notebook does not see it and crash reports carry no stderr tail.
    inherit,
    /// Discarded (the last stderr lines are still kept for crash reports).
    discard,
};

/// How worker processes come to be.
///
/// - exec: each worker is a new program (fork + exec): the program itself, or
///   mpify-worker for functions in shared libraries. A program linked to LibTorch takes
///   most of a second to start, so ranch(4, ...) pays seconds on two cores before any
///   work.
/// - warm_template: on first use, one template process per worker program is started by
///   exec; it loads LibTorch and the libraries holding the functions, and then forks a
///   worker for each rank in milliseconds. Each worker is the caller's child and
///   behaves exactly as an exec'd one: same channel, output, failure reports,
///   LOCAL_RANK, and it dies with the caller.
///
/// The template stays fork-safe by these rules: it starts no thread (before each fork
/// it checks that it has exactly one, and if not, mpify logs why and starts workers by
/// exec from then on), never initializes CUDA, never runs a user function and never
/// computes with tensors (no OpenMP pool). The static initializers of the program and
/// of the libraries it loads do run in it: they must not start threads either.
/// It ends when its caller ends; one that crashed or was killed is replaced at the next
/// call; a library rebuilt on disk is loaded by a new template. Environment variables
/// that libraries read as they load (LD_*, GLIBC_TUNABLES, MALLOC_*, OMP_*, GOMP_*,
/// KMP_*, MKL_*, OPENBLAS_*) are those the template started with: a call that sets
/// different ones gets a new template.
///
/// Choose exec when workers must start from a clean program image, e.g. a program whose
/// static initializers start threads. The environment variable MPIFY_SPAWNER (exec or
/// template) overrides this option in every call.
enum class Spawner { exec, warm_template };

/// Options of one ranch call. Every field has a sensible default.
struct Options {
    /// The rank the calling process runs itself, or std::nullopt for "the caller only
    /// waits" (then all n ranks are new processes). Must be in [0, n).
    std::optional<int> caller_rank = 0;

    /// true: ranch returns every rank's result, indexed by rank. false: workers send no
    /// result back, and ranch returns only the caller's own result (one element), or an
    /// empty vector when caller_rank is std::nullopt.
    bool gather = true;

    /// Extra environment variables for every rank. Workers start with them; the caller
    /// (when it has a rank) sees them while its fn runs, and its environment is restored
    /// afterwards. LOCAL_RANK and LOCAL_WORLD_SIZE are always set by mpify.
    std::map<std::string, std::string> env;

    /// Give up after this long: every worker is stopped and TimeoutError names the
    /// ranks still running. Zero means no timeout. The caller's own rank cannot be
    /// interrupted: ranch waits for it to return before throwing. With restarts, the
    /// timeout bounds the whole call, every attempt included.
    std::chrono::milliseconds timeout{0};

    /// How many times a failed call is started again. When a rank fails (an exception,
    /// the caller's own included; a crash, an exit, a kill; a machine gone silent), the
    /// other ranks are stopped and reaped as without restarts, one line on std::cerr says
    /// what failed and which restart begins, and the whole call runs again: fresh
    /// processes, a fresh group for in_ddp, the same arguments. Every rank of an attempt
    /// sees its number in mpify::restart_count(), so that a training function resumes
    /// from its last checkpoint. An interrupt, a timeout, a usage error and a worker that
    /// cannot be started are never retried. When every attempt failed, WorkerError lists
    /// each attempt's failures in order (RankFailure::attempt), the last one's exception
    /// nested. The caller's own rank lives through every restart: it is this process.
    int restarts = 0;

    /// The fewest ranks worth going on with when a restart follows the loss of a machine
    /// (Options::placement on other machines; 0: no shrinking). A machine whose rank was
    /// lost (RankFailure::Kind::lost: its connection closed or fell silent) is left out of
    /// every later attempt, and the call restarts on the machines that answer — as many
    /// ranks as they hold, up to n (spare hosts of the placement step in) — as long as
    /// that is at least min_ranks; otherwise WorkerError says what was left. The function
    /// sees the attempt's size in its group's world size (ranch returns one result per
    /// rank of the attempt that succeeded). A machine that comes back is not waited for.
    /// On one machine every attempt has n ranks.
    int min_ranks = 0;

    /// Where workers' stdout/stderr go; see Relay.
    Relay relay = Relay::lines;

    /// With Relay::lines: if set, each line (without its newline) goes here instead of
    /// std::cout / std::cerr. Called from mpify's supervisor thread, one whole line at a
    /// time ("\r\n" ends one; a line longer than 1 MiB comes cut there, with a mark). If
    /// it throws, every worker is stopped and ranch throws mpify::Error (the exception
    /// nested), which Options::restarts never restarts.
    std::function<void(int rank, Stream stream, const std::string& line)> on_output;

    /// With Relay::lines: the ranks whose lines are relayed, to the caller's streams or
    /// to on_output (torchrun's --local-ranks-filter); empty: every rank. The others'
    /// output is read and dropped; their last stderr lines still go into a failure's
    /// report.
    std::vector<int> output_ranks;

    /// With Relay::lines to the caller's streams: what comes before each line, with
    /// `{rank}` replaced by the rank and `{host}` by its machine (empty for this one).
    /// Empty: "[rank k] ", and "[rank k@host] " for a rank on another machine. A line a
    /// worker redraws with a carriage return (a progress bar) is relayed as it is drawn,
    /// prefixed and ended by a carriage return, so that a terminal or a notebook shows one
    /// live line; on_output gets only whole lines.
    std::string output_prefix;

    /// Before ranks still running are stopped (a timeout, an interrupt, another rank's
    /// failure), read where each one is: every thread's stack, in RankFailure::stack and
    /// Interrupted::stacks(), its innermost frames of user code in what(). At most 2 s
    /// in all; a rank that cannot be read in time, or at all, says why. Needs
    /// mpify-stacks (built where elfutils' libdw is) and ptrace: see docs/hangs.md.
    bool stacks = true;

    /// When ranks must be stopped (a failure, a timeout), each gets SIGTERM, then SIGKILL
    /// after this grace period.
    std::chrono::milliseconds stop_grace{1000};

    /// How workers are started; see Spawner. MPIFY_SPAWNER overrides it.
    Spawner spawner = Spawner::warm_template;

    /// Arguments whose serialized size reaches this many bytes are written once into
    /// shared memory (a memfd, kept by the process for the next call) that every worker
    /// maps, instead of being sent to each worker through its channel. SIZE_MAX: never.
    std::size_t shared_memory_threshold = std::size_t(1) << 20;

    /// Where the ranks run: this machine (the default), or other machines through a
    /// launcher; see Placement. Arguments then travel over the network (never in shared
    /// memory), and Options::spawner applies on this machine only.
    Placement placement;
};

MPIFY_END_NAMESPACE
