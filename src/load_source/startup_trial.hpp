#pragma once
// A library's static initializers run when it is loaded, inside the process that loads
// it: one that throws aborts that process, one that calls exit() ends it. For a notebook
// that process is the kernel, with everything the user has built in it. So load_source
// first loads a library it compiled in a short-lived process (mpify-worker --try-load),
// once per library (a marker beside it records a clean start), and loads it into the
// caller only when that process started it cleanly.
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Returns once `library` is known to load and start cleanly; throws mpify::Error naming
/// `source`, what its start-up did (threw, exited with N, died of a signal, did not
/// finish within two minutes) and the last of its output.
void check_library_starts(const std::string& library, const std::string& source);

/// Forgets that `library` started cleanly (it is being compiled again).
void forget_library_start(const std::string& library);

MPIFY_END_DETAIL_NAMESPACE
