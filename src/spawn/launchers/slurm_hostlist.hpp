#pragma once
// Slurm's compressed host lists ("gpu[01-04,7],cpu-a[1-2]", "rack[1-2]-n[01-02]"),
// expanded as `scontrol show hostnames` does: ranges keep the width of their first
// number's leading zeros, several bracket groups in one name multiply, leftmost slowest.
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Most hosts one list may expand to (the largest clusters have tens of thousands of
/// nodes), and most characters in all their names together: a typo like n[1-99999999]
/// is refused, not allocated.
constexpr std::size_t max_hostlist_hosts = 100000;
constexpr std::size_t max_hostlist_characters = 4u << 20;

/// The hosts of `list`, in order. Throws UsageError naming the list and what is wrong
/// (an unclosed bracket, a range that runs backwards, too many hosts or characters).
std::vector<std::string> expand_hostlist(const std::string& list);

MPIFY_END_DETAIL_NAMESPACE
