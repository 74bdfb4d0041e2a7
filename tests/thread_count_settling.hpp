#pragma once
// Thread counts compared across a join. pthread_join returns when the kernel clears the
// thread's id, a moment before the thread leaves /proc/self/task; a count read right
// after a join (or taken as a baseline right after a call that joined a thread) can
// still include it. Used by the tests that check that threads end with their owner.
#include <chrono>
#include <thread>

namespace mpify_test {

/// The value of `count()` once it is at most `most`, or its last value when it has not
/// come down to `most` within 10 seconds (a leaked thread: the check fails then).
template <class Count>
int count_settled_at_most(Count count, int most) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int now = count();
    while (now > most && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
        now = count();
    }
    return now;
}

}  // namespace mpify_test
