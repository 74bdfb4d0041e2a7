#include "common/debug_log.hpp"

#include "common/posix.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

bool debug_wanted() {
    const char* value = std::getenv("MPIFY_DEBUG");
    return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

void debug_line(const std::string& text) {
    if (!debug_wanted()) return;
    const std::string line = "mpify debug: " + text + "\n";
    try {
        write_all(STDERR_FILENO, line.data(), line.size(), "mpify: the debug log");
    } catch (const std::exception&) {  // a closed stderr loses the log, not the call
    }
}

MPIFY_END_DETAIL_NAMESPACE
