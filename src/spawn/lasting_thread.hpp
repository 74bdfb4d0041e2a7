#pragma once
// A thread of the caller that lasts as long as the process: the warm template is started
// from it.
//
// Linux ties a child to the *thread* that forked it: when that thread exits, the child is
// handed to another thread, and PR_SET_PDEATHSIG fires. Workers forked by the template
// are (CLONE_PARENT) children of whichever thread started the template, and carry
// PDEATHSIG; started from a short-lived thread (an app's worker thread, a pool, a
// kernel's execution thread), its exit would kill the workers of a call running in
// another thread. Started from this thread, they die only with the process.
#include <functional>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// Runs `task` on the lasting thread (started on first use, and again in a forked copy
/// of the process) and waits for it; what it throws is rethrown here.
void run_on_lasting_thread(const std::function<void()>& task);

MPIFY_END_DETAIL_NAMESPACE
