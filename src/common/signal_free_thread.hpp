#pragma once
// Threads of mpify's own take no signal: signals stay with the application's threads, so
// no handler of the application (or of a notebook's kernel) runs on a thread it did not
// make, and a SIGINT meant for a cell is never swallowed by a helper.
#include <functional>
#include <thread>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Starts `body` on a new thread named `name` (as `top -H`, debuggers and mpify's stacks
/// show it: "mpify-" and what it does, at most 15 characters) with every signal blocked
/// (the mask a thread inherits when it is made); the calling thread's mask is as it was
/// when this returns or throws.
std::thread start_signal_free_thread(const char* name, std::function<void()> body);

/// Names the calling thread `name` (at most 15 characters; Linux cuts a longer one).
void name_this_thread(const char* name) noexcept;

MPIFY_END_DETAIL_NAMESPACE
