#pragma once
// This process's record of its group's collective calls (the flight recorder): a ring of
// the last calls in memory of its own (a memfd mapping, found by mpify-stacks through
// /proc/PID/maps), written as each call is entered and as its wait ends. The cost is a
// few stores per call; nothing is sent anywhere until a report reads it.
#include "forensics/collective_record_layout.hpp"

#include <mpify/abi.hpp>
#include <mpify/stack.hpp>

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// The environment variable that turns the record off for a whole program ("0").
constexpr const char* collective_record_var = "MPIFY_COLLECTIVE_RECORD";

/// Starts the record of a group this process opened: its calls count from 1 again.
void open_collective_record(int rank, int world_size) noexcept;
/// The group closed: the record is empty.
void close_collective_record() noexcept;
/// Which group's record this is: a number that changes at every open_collective_record
/// of this process.
std::uint64_t collective_record_generation() noexcept;

/// A call about to be made, as the record keeps it.
struct CallToRecord {
    const char* operation = "";
    std::string dtype;
    std::int64_t elements = 0;
    std::uint64_t bytes = 0;
    std::string detail;
    const char* site = "";
    int bucket = -1;
};

/// Enters `call`: its sequence number in the group (0 when no group is open, or there is
/// no memory for the record).
std::uint64_t record_call_started(const CallToRecord& call) noexcept;
/// The wait for call `sequence` ended.
void record_call_ended(std::uint64_t sequence) noexcept;

/// This process's recorded calls, oldest first.
std::vector<CollectiveCall> own_recorded_calls();

/// "" when `record` holds what mpify writes: its header's numbers in range, each call in
/// its place of the ring among the last ones entered, its times not after `now_ns` and in
/// order, its sizes within what a machine holds. Else what is not, for a note (the record
/// lies in the rank's own memory: the rank may have written anything there).
std::string implausibility(const CollectiveRecordMemory& record, std::int64_t now_ns);

/// The calls a record holds, oldest first, their ages counted to `now_ns` (CLOCK_MONOTONIC
/// of the machine that wrote them). None when the record is not plausible
/// (implausibility): then `ignored_because`, when given, says why.
std::vector<CollectiveCall> recorded_calls_in(const CollectiveRecordMemory& record, std::int64_t now_ns,
                                              std::string* ignored_because = nullptr);

/// The record of process `pid`, read through /proc/PID/mem (the reader may trace it):
/// empty when it has none, or no group open, or it is not plausible (`ignored_because`).
std::vector<CollectiveCall> read_collective_record(pid_t pid, std::string* ignored_because = nullptr);

MPIFY_END_DETAIL_NAMESPACE
