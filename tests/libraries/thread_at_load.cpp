// A library that starts a thread as it loads: a template that loads it can no longer
// fork safely, so mpify must start its workers by exec (and say why).
#include <mpify/mpify.hpp>

#include <unistd.h>

#include <thread>

namespace {
const bool started = [] {
    std::thread([] {
        for (;;) ::pause();
    }).detach();
    return true;
}();
}  // namespace

int answer_despite_a_thread() { return started ? 42 : 0; }
MPIFY_REGISTER(answer_despite_a_thread);

extern "C" int (*mpify_test_answer_despite_a_thread())() { return &answer_despite_a_thread; }
