#pragma once
// Text a worker wrote (an exception's message, stderr lines, its stack's names, its record
// of collective calls) as it may appear in mpify's own messages: a terminal or a notebook
// that shows an error must not run the worker's escape sequences.
#include <string>
#include <string_view>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// `text` with its control characters written out: C0 controls but newline and tab
/// ("\x1b"), DEL ("\x7f") and UTF-8's C1 controls ("\u009b"). Printable text, and text
/// that went through it once, comes back unchanged.
std::string printable(std::string_view text);

MPIFY_END_DETAIL_NAMESPACE
