// How a rank's stack reads in messages: every frame (describe), or the few innermost
// frames of the user's own code in one line (summary), which is what a user looks for
// first in a hang: the line of theirs that the rank is stuck under.
#include "common/printable.hpp"

#include <mpify/stack.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

MPIFY_BEGIN_NAMESPACE
namespace {

constexpr std::size_t summary_frames = 3;

std::string file_name(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

std::string folder_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

bool is_libtorch(const std::string& module_name) {
    return starts_with(module_name, "libtorch") || starts_with(module_name, "libc10");
}

// The folders LibTorch's own libraries were loaded from, in this thread's stack. What a
// distribution of LibTorch ships beside them is LibTorch's too: PyPI's wheels carry their
// own OpenMP runtime (libgomp.so.1) there, whose barriers a tensor operation waits in.
std::vector<std::string> libtorch_folders(const std::vector<StackFrame>& frames) {
    std::vector<std::string> folders;
    for (const StackFrame& frame : frames)
        if (is_libtorch(file_name(frame.module)) &&
            std::find(folders.begin(), folders.end(), folder_of(frame.module)) == folders.end())
            folders.push_back(folder_of(frame.module));
    return folders;
}

// The runtimes LibTorch computes with, wherever they were installed (the wheels put CUDA's
// in folders of their own, site-packages/nvidia/*/lib).
bool is_compute_runtime(const std::string& module_name) {
    for (const char* prefix :
         {"libgomp", "libiomp", "libomp", "libcuda", "libcublas", "libcudnn", "libnccl", "libnvrtc", "libnvJitLink"})
        if (starts_with(module_name, prefix)) return true;
    return false;
}

// The C and C++ runtimes, LibTorch (with what ships beside it) and mpify itself: whatever
// the user's code is waiting in, the user's own frames are the ones outside these. Code of
// theirs compiled into the user's objects (mpify's templates, the standard library's) is
// known by its header.
bool is_runtime_or_library(const StackFrame& frame, const std::vector<std::string>& libtorch_folders) {
    const std::string& path = frame.module;
    const std::string name = file_name(path);
    const std::string& file = frame.file;
    if (starts_with(path, "/lib/") || starts_with(path, "/lib64/") || starts_with(path, "/usr/lib/") ||
        starts_with(path, "/usr/lib64/") || is_libtorch(name) || is_compute_runtime(name) ||
        starts_with(name, "libmpify.so") || starts_with(name, "libmpify_torch.so") || name == "mpify-worker" ||
        (!path.empty() &&
         std::find(libtorch_folders.begin(), libtorch_folders.end(), folder_of(path)) != libtorch_folders.end()))
        return true;
    // In the user's object, from a library's header: the library's own function (a
    // template of std:: or mpify::), unless a function of the user's inlined it.
    const bool from_a_library_header = starts_with(file, "/usr/include/") ||
                                       file.find("/include/mpify/") != std::string::npos;
    const std::string name_part = frame.function.substr(0, frame.function.find('('));
    return from_a_library_header &&
           (name_part.find("std::") != std::string::npos || name_part.find("mpify::") != std::string::npos);
}

// A summary's function names stay readable: a long template's name is cut.
constexpr std::size_t longest_summary_name = 100;

// "f(std::__cxx11::basic_string<...>, int) const" -> "f(...) const": the name says which
// function; its parameter types rarely help a summary.
std::string without_parameters(const std::string& name) {
    const std::size_t close = name.rfind(')');
    if (close == std::string::npos) return name;
    int depth = 0;
    for (std::size_t i = close + 1; i-- > 0;) {
        if (name[i] == ')') ++depth;
        if (name[i] == '(' && --depth == 0)
            return close - i > 1 ? name.substr(0, i) + "(...)" + name.substr(close + 1) : name;
    }
    return name;
}

std::string frame_text(const StackFrame& frame, bool full_path) {
    std::string text = frame.function.empty() ? fmt::format("0x{:x}", frame.address) : frame.function;
    if (!full_path) text = without_parameters(text);
    if (!full_path && text.size() > longest_summary_name) text = text.substr(0, longest_summary_name - 3) + "...";
    if (!frame.file.empty())
        text += fmt::format(" at {}{}", full_path ? frame.file : file_name(frame.file),
                            frame.line > 0 ? ":" + std::to_string(frame.line) : std::string());
    return text;
}

// Every thread, a frame per line (RankStack::describe, before its names are made printable).
std::string all_frames(const std::vector<ThreadStack>& threads, const std::string& unavailable) {
    if (threads.empty()) return unavailable.empty() ? "(no stack was read)" : unavailable;
    std::string text;
    for (const ThreadStack& thread : threads) {
        if (!text.empty()) text += '\n';
        text += fmt::format("thread {} ({}):", thread.tid, thread.name);
        for (std::size_t i = 0; i < thread.frames.size(); ++i)
            text += fmt::format("\n  #{} {} ({})", i, frame_text(thread.frames[i], true),
                                file_name(thread.frames[i].module));
    }
    if (!unavailable.empty()) text += "\n(" + unavailable + ")";
    return text;
}

// The innermost frames of the user's own code in one line (RankStack::summary, before its
// names are made printable).
std::string user_frames(const std::vector<ThreadStack>& threads, const std::string& unavailable) {
    if (threads.empty()) return unavailable.empty() ? "(no stack was read)" : unavailable;
    const std::vector<StackFrame>& frames = threads.front().frames;
    const std::vector<std::string> folders = libtorch_folders(frames);
    std::vector<const StackFrame*> shown;
    for (const StackFrame& frame : frames)
        if (!is_runtime_or_library(frame, folders) && !frame.function.empty() && shown.size() < summary_frames)
            shown.push_back(&frame);
    // All of it in libraries (a rank waiting in mpify or LibTorch on behalf of nobody's
    // code shown here): the innermost frames, whatever they are.
    if (shown.empty())
        for (std::size_t i = 0; i < std::min(frames.size(), summary_frames); ++i) shown.push_back(&frames[i]);
    if (shown.empty()) return unavailable.empty() ? "(no frame could be read)" : unavailable;
    std::string text;
    for (const StackFrame* frame : shown) text += (text.empty() ? "" : " <- ") + frame_text(*frame, false);
    return text;
}

}  // namespace

// A stack's names come from the rank's own files: printable, whatever they hold.
std::string RankStack::describe() const { return detail::printable(all_frames(threads, unavailable)); }

std::string RankStack::summary() const { return detail::printable(user_frames(threads, unavailable)); }

MPIFY_END_NAMESPACE
