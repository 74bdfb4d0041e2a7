#pragma once
// Runs a check in a forked copy of the kernel, where nothing it does can reach the
// session: clang 19 crashes on some bad cells (a null name dereferenced while it cleans
// up after a parse error, fixed upstream after 19.1.7) and a failed parse can leave
// half-made declarations behind that break later cells. So a cell is first parsed in a
// child; the kernel parses and runs it only when the child found nothing wrong.
//
// Costs: the fork itself takes milliseconds with LibTorch loaded, and the child's parse
// is slower than the parent's (copy-on-write faults); figures in benchmarks/README.md,
// "The kernel". See docs/notebooks.md, "The kernel".
#include <functional>
#include <string>

namespace mpify_kernel {

/// What a child said.
struct ChildVerdict {
    enum class Kind {
        passed,       ///< the check returned true
        failed,       ///< the check returned false; `text` says why
        crashed,      ///< the child died by `signal`; `text` is its last words
        interrupted,  ///< the user interrupted the wait; the child was killed
    };
    Kind kind = Kind::failed;
    std::string text;
    int signal = 0;
};

/// Forks; the child runs `check(text)` with fds 1 and 2 on /dev/null, and on a crash
/// sends `*last_words` (a buffer the check fills as it goes). The parent waits,
/// interruptibly. Call from the thread that runs cells.
ChildVerdict check_in_child(const std::function<bool(std::string& text)>& check, const std::string* last_words);

}  // namespace mpify_kernel
