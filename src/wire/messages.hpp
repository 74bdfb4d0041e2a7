#pragma once
// What the channel's frames carry (frames.hpp): a call's metadata ahead of its
// arguments, and a worker's failure.
#include <cstdint>
#include <string>
#include <string_view>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct CallMeta {
    /// The caller's mpify (MPIFY_VERSION_STRING). First on the wire, and the one field
    /// every version keeps in place: a worker of another version reads it before
    /// anything else and refuses the call by name.
    std::string mpify_version;
    std::int32_t rank = 0;
    std::int32_t world_size = 1;
    bool want_result = true;
    std::string function;      ///< registered name
    std::string signature;     ///< its type as the caller knows it (typeid(F*).name())
    std::string library;       ///< shared object to load first; empty: the program itself
    std::string context_key;   ///< typeid name of the context; empty: none
    /// Shared object that registers the context, loaded before it is looked up (the
    /// function's library need not depend on it: DdpGuard's is libmpify_torch); empty: none.
    std::string context_library;
    /// Size of the arguments when they are in shared memory (fd worker_args_fd); 0: they
    /// follow the metadata in the call frame.
    std::uint64_t shared_args_size = 0;
};

struct FailureInfo {
    std::string type;
    std::string what;
    /// When the worker caught it, on the machine-wide monotonic clock (steady_clock is
    /// CLOCK_MONOTONIC): comparable with the caller's own clock readings.
    std::int64_t when_ns = 0;
};

/// The call payload's leading part; the argument blob follows it directly.
std::string encode_call_meta(const CallMeta& meta);
/// Everything of a call frame that precedes its `args_size` bytes of arguments: the
/// frame header and the metadata. (The arguments are sent from where they are.)
std::string call_frame_head(const CallMeta& meta, std::size_t args_size);
/// Splits a call payload into its meta and the argument blob (a view into `payload`).
CallMeta decode_call(std::string_view payload, std::string_view& args);
/// The mpify version a call payload names: its first field, whatever follows it.
std::string call_version(std::string_view payload);

std::string encode_failure(const FailureInfo& failure);
FailureInfo decode_failure(std::string_view payload);

MPIFY_END_DETAIL_NAMESPACE
