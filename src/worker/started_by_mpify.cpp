#include "worker/started_by_mpify.hpp"


#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace mpify::detail {

int channel_from_environment(const char* variable) {
    const char* text = std::getenv(variable);
    char* end = nullptr;
    const long fd = text ? std::strtol(text, &end, 10) : -1;
    struct stat info {};
    const bool number = text && *text && end && *end == '\0' && fd >= 0 && fd < 1 << 20;
    if (number && ::fstat(static_cast<int>(fd), &info) == 0 && S_ISSOCK(info.st_mode))
        return static_cast<int>(fd);
    std::fprintf(stderr,
                 "mpify: this program was started as an mpify %s (%s=%s) but %s; only mpify sets %s, with the "
                 "channel it gives its processes. Is it exported in your shell? Unset it (unset %s).\n",
                 variable[6] == 'W' ? "worker" : "warm template", variable, text ? text : "",
                 !number ? "that is not a file descriptor number" : "that descriptor is not mpify's channel",
                 variable, variable);
    std::fflush(stderr);
    ::_exit(70);
}

}  // namespace mpify::detail
