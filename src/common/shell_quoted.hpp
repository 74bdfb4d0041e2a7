#pragma once
// Words for /bin/sh: the commands mpify has a shell run (a remote rank's launcher) are
// built from host names, paths and ids that must each stay one word, whatever they hold.
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// `word` in single quotes (a quote inside as '\''): one word for /bin/sh, taken literally.
inline std::string shell_quoted(const std::string& word) {
    std::string quoted = "'";
    for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}

MPIFY_END_DETAIL_NAMESPACE
