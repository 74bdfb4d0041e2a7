#pragma once
// What mpify-stacks prints and how the caller reads it back: a line per process, thread
// and frame, and one per recorded collective call, fields separated by tabs (none of
// them can hold one: see the .cpp).
#include <mpify/abi.hpp>
#include <mpify/stack.hpp>

#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// The stacks of one process's threads, or why there are none.
struct DumpedProcess {
    int pid = 0;
    std::vector<ThreadStack> threads;
    std::string error;  ///< empty when `threads` were read
    std::vector<CollectiveCall> collectives;  ///< its group's record (collective_record.hpp)
    std::string record_ignored;  ///< why its record was not plausible, and so left out; else empty
};

std::string format_stack_dump(const std::vector<DumpedProcess>& processes);

/// The lines format_stack_dump writes, for a dump written as it is read (mpify-stacks): a
/// process's first line (with why nothing of it was read, if so), a call of its record (or
/// why its record was left out),
/// a thread and its frames, and, after its threads, what of them is missing.
std::string process_line(int pid, const std::string& error);
std::string call_line(const CollectiveCall& call);
std::string record_ignored_line(const std::string& why);
std::string thread_lines(const ThreadStack& thread);
std::string error_line(const std::string& error);

/// The processes in `text`, as format_stack_dump wrote them. Lines it does not know are
/// skipped: a dump cut by the deadline gives what came before the cut.
std::vector<DumpedProcess> parse_stack_dump(const std::string& text);

MPIFY_END_DETAIL_NAMESPACE
