#pragma once
// The record of a rank's last collective calls (the flight recorder), as it lies in
// memory: written by the rank (collective_record.hpp), read from outside by mpify-stacks
// while the process is held, so that a rank that hangs or spins is read as it is. Plain
// fixed-size fields: the reader is another program, possibly of another build.
#include <cstdint>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// How mpify-stacks finds the record: the memfd's name, as /proc/PID/maps shows it.
inline constexpr const char* collective_record_name = "mpify-collectives";
inline constexpr char collective_record_magic[8] = {'m', 'p', 'i', 'f', 'y', 'C', 'R', '1'};

/// One collective call. The writer fills every field, then `sequence` (release): a
/// reader that sees a sequence sees the call it names; 0 is an empty slot.
struct RecordedCall {
    std::uint64_t sequence;      ///< 1 for the group's first collective
    std::int64_t elements;       ///< of this rank's tensor
    std::uint64_t bytes;         ///< of this rank's tensor
    std::int64_t started_ns;     ///< CLOCK_MONOTONIC, when the rank entered the call
    std::int64_t ended_ns;       ///< CLOCK_MONOTONIC, when its wait ended; 0 until then
    std::int32_t bucket;         ///< DistributedDataParallel's bucket; -1 for other calls
    std::int32_t padding;
    char operation[16];          ///< "allreduce", "broadcast", "allgather", "barrier"
    char dtype[16];              ///< "Float"...; empty for a barrier
    char detail[24];             ///< "SUM", "from rank 0"...
    char site[48];               ///< who called: "mpify::ddp::all_reduce"...
};

struct RecordHeader {
    char magic[8];
    std::uint32_t capacity;  ///< calls in the ring that follows the header
    std::int32_t rank;       ///< in the group; -1 while no group is open
    std::int32_t world_size;
    std::int32_t padding;
    std::uint64_t next_sequence;  ///< the last call's sequence (calls[(s - 1) % capacity])
};

/// The last this many calls are kept.
inline constexpr std::uint32_t recorded_calls = 64;

struct CollectiveRecordMemory {
    RecordHeader header;
    RecordedCall calls[recorded_calls];
};

MPIFY_END_DETAIL_NAMESPACE
