#pragma once
// mpify's debug log: with MPIFY_DEBUG set (to anything but "" or "0") in the caller's
// environment, mpify says on the caller's stderr what it runs on the user's behalf (the
// launchers' exact commands) and how long each step of starting remote ranks took.
// Secrets never go into it.
#include <string>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Whether MPIFY_DEBUG asks for the debug log.
bool debug_wanted();
/// Writes "mpify debug: <text>" and a newline to stderr in one write, when debug_wanted().
void debug_line(const std::string& text);

MPIFY_END_DETAIL_NAMESPACE
