#pragma once
// Threads of mpify's own take no signal: signals stay with the application's threads, so
// no handler of the application (or of a notebook's kernel) runs on a thread it did not
// make, and a SIGINT meant for a cell is never swallowed by a helper.
#include <functional>
#include <thread>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Starts `body` on a new thread with every signal blocked (the mask a thread inherits
/// when it is made); the calling thread's mask is as it was when this returns or throws.
std::thread start_signal_free_thread(std::function<void()> body);

MPIFY_END_DETAIL_NAMESPACE
