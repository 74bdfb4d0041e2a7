#pragma once
// Reading where ranks are: one mpify-stacks per process, all at once, within a limit.
#include "common/unique_fd.hpp"
#include "spawn/command_output.hpp"

#include <mpify/abi.hpp>
#include <mpify/stack.hpp>

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// The longest a call waits for its ranks' stacks, all of them together: a stack is a
/// help to the report, never a reason for the report to wait long.
constexpr std::chrono::milliseconds stack_collection_limit{2000};

/// A rank whose stack is wanted.
struct StackTarget {
    int rank = -1;
    std::string host;       ///< the rank's machine, when another than this one
    pid_t pid = 0;          ///< the process to read
    pid_t rank_thread = 0;  ///< the thread that runs the rank (0: the process's main thread)
    std::string unreadable; ///< not empty: not read, and this says why
    /// A rank on another machine: its stand-in's control socket (a dup, so that it
    /// outlives the call that listed it), through which the rank's agent reads it there.
    std::shared_ptr<UniqueFd> control;
};

/// What a reader's (or an agent's) dump of `target` says, however it ended: the record
/// kept even when the stacks did not come.
RankStack stack_from(const StackTarget& target, const CommandOutput& output);

/// Where each target is, in the targets' order. A target that cannot be read (no
/// mpify-stacks, no permission, gone, not within `limit`) gets RankStack::unavailable
/// saying why. This process may be a target (the caller's own rank): it is read by its
/// child, which it allows to trace it meanwhile.
std::vector<RankStack> collect_stacks(const std::vector<StackTarget>& targets, std::chrono::milliseconds limit);

/// A remote rank's agent's answer to where its worker `pid` is (read here, within
/// `limit`; `ended`: not read, the worker had ended), as a stack dump of at most
/// `most_bytes` (stack_dump_format.hpp), which the caller reads with stack_from.
std::string worker_stack_dump(pid_t pid, bool ended, std::chrono::milliseconds limit, std::size_t most_bytes);

MPIFY_END_DETAIL_NAMESPACE
