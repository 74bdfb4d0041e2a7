#include "worker/started_by_mpify.hpp"

#include "common/environment_number.hpp"
#include "contract/process_contract.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

int channel_from_environment(const char* variable) {
    const char* text = std::getenv(variable);
    // Malformed reads as -1 here: the message below says what is wrong with it.
    const long long fd = environment_number(variable, -1, Malformed::use_fallback, "mpify", 0, INT_MAX);
    const bool number = fd >= 0 && fd <= INT_MAX;
    struct stat info{};
    if (number && ::fstat(static_cast<int>(fd), &info) == 0 && S_ISSOCK(info.st_mode)) return static_cast<int>(fd);
    std::fprintf(stderr,
                 "mpify: this program was started as an mpify %s (%s=%s) but %s; only mpify sets %s, with the "
                 "channel it gives its processes. Is it exported in your shell? Unset it (unset %s).\n",
                 std::strcmp(variable, worker_env_var) == 0 ? "worker" : "warm template", variable, text ? text : "",
                 !number ? "that is not a file descriptor number" : "that descriptor is not mpify's channel", variable,
                 variable);
    std::fflush(stderr);
    ::_exit(70);
}

MPIFY_END_DETAIL_NAMESPACE
