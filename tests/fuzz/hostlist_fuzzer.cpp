// libFuzzer target: Slurm host lists from the environment. Either a list of non-empty
// host names within the limit, or a UsageError.
#include "spawn/launchers/slurm_hostlist.hpp"

#include <mpify/error.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size > 256) return 0;  // environment variables of real jobs are short; bound the expansion work
    try {
        const auto hosts = mpify::detail::expand_hostlist(std::string(reinterpret_cast<const char*>(data), size));
        if (hosts.empty() || hosts.size() > mpify::detail::max_hostlist_hosts) std::abort();
        for (const std::string& host : hosts)
            if (host.empty()) std::abort();
    } catch (const mpify::UsageError&) {
    }
    return 0;
}
