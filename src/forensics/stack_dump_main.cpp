// mpify-stacks [--within MILLISECONDS] PID...: where every thread of each process is, for
// mpify's reports of a hang or a failure (forensics/stack_dump_format.hpp says what it prints).
// With --within, what is not unwound by then is left out, so that the answer (the group's
// record first of all, read before any stack) comes within the caller's limit: reading
// the line tables of large libraries on a loaded machine can take seconds.
//
// A program of its own rather than code in the caller: ptrace stops every thread it
// looks at, so a helper that is killed at its deadline must not be the process whose
// threads it stopped, and nothing of libdw's lands in the caller's address space.
// Each thread is seized and interrupted (PTRACE_SEIZE, PTRACE_INTERRUPT), not attached
// with SIGSTOP: if this program dies half-way, the kernel lets the threads go on, with
// no stop signal left pending. The process looked at may be the one reading this output:
// while its threads are held, only its record is printed (a few KiB, which the pipe
// holds unread), at once, so that a reader killed at the caller's deadline has given the
// record at least; the stacks follow once the threads are let go.
#include "common/clock.hpp"
#include "common/demangle.hpp"
#include "forensics/collective_record.hpp"
#include "forensics/stack_dump_format.hpp"

#include <elfutils/libdwfl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace mpify::detail;

namespace {

constexpr int max_frames = 64;

// --within: when unwinding stops, whatever is left.
std::optional<Clock::time_point> deadline;

bool out_of_time() { return deadline && Clock::now() >= *deadline; }

std::set<pid_t> threads_of(pid_t pid) {
    std::set<pid_t> tids;
    const std::string folder = "/proc/" + std::to_string(pid) + "/task";
    if (DIR* dir = ::opendir(folder.c_str())) {
        while (const dirent* entry = ::readdir(dir))
            if (entry->d_name[0] != '.') tids.insert(static_cast<pid_t>(std::atoi(entry->d_name)));
        ::closedir(dir);
    }
    return tids;
}

std::string thread_name(pid_t pid, pid_t tid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
    std::string name;
    std::getline(in, name);
    return name;
}

// The threads of one process, held still for as long as this object lives.
class HeldThreads {
public:
    explicit HeldThreads(pid_t pid) {
        // Threads started while the first ones were being seized are seized on a second
        // look, and so on (a few rounds: a process that keeps starting threads is read as
        // far as it was held).
        for (int round = 0; round < 4; ++round) {
            bool new_ones = false;
            for (const pid_t tid : threads_of(pid)) {
                if (held_.count(tid) != 0 || failed_.count(tid) != 0) continue;
                new_ones = true;
                int pending_signal = 0;
                if (hold(tid, pending_signal)) held_[tid] = pending_signal;
                else failed_.insert(tid);
            }
            if (!new_ones) break;
        }
    }
    ~HeldThreads() {
        // A thread that stopped for a signal on its way (a signal-delivery stop, not the
        // interrupt's) gets it back: letting go must not swallow the user's Ctrl-C.
        for (const auto& [tid, signal] : held_)
            ::ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<std::intptr_t>(signal)));
    }
    HeldThreads(const HeldThreads&) = delete;
    HeldThreads& operator=(const HeldThreads&) = delete;

    std::set<pid_t> held() const {
        std::set<pid_t> tids;
        for (const auto& entry : held_) tids.insert(entry.first);
        return tids;
    }
    const std::string& first_error() const { return first_error_; }

private:
    bool hold(pid_t tid, int& pending_signal) {
        if (::ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) return note(tid, "PTRACE_SEIZE", errno);
        if (::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
            const int error = errno;
            ::ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
            return note(tid, "PTRACE_INTERRUPT", error);
        }
        int status = 0;
        while (::waitpid(tid, &status, __WALL) < 0) {
            if (errno == EINTR) continue;
            return note(tid, "waitpid", errno);  // the thread ended meanwhile
        }
        if (!WIFSTOPPED(status)) return note(tid, "waitpid", ESRCH);
        // The interrupt's stop says PTRACE_EVENT_STOP; any other stop is a signal arriving.
        if (status >> 16 != PTRACE_EVENT_STOP) pending_signal = WSTOPSIG(status);
        return true;
    }
    bool note(pid_t tid, const char* what, int error) {
        if (first_error_.empty())
            first_error_ = "thread " + std::to_string(tid) + ": " + what + ": " + std::strerror(error);
        return false;
    }

    std::map<pid_t, int> held_;  // and the signal each must get back when let go
    std::set<pid_t> failed_;
    std::string first_error_;
};

// "__libc_start_main@@GLIBC_2.34": the version node is the linker's business.
std::string without_symbol_version(std::string name) {
    const auto at = name.find('@');
    if (at != std::string::npos) name.resize(at);
    return name;
}

struct Unwinding {
    Dwfl* dwfl = nullptr;
    std::vector<mpify::StackFrame> frames;
    bool cut = false;  ///< stopped by the deadline, not by the stack's end
};

// dwfl_module_getsrc finds an address's compile unit through .debug_aranges, which Clang
// does not emit unless told (-gdwarf-aranges) and elfutils 0.188 does not make up: then
// each compile unit's own ranges are asked.
void source_line_without_aranges(Dwfl_Module* module, Dwarf_Addr address, mpify::StackFrame& frame) {
    Dwarf_Addr bias = 0;
    for (Dwarf_Die* unit = dwfl_module_nextcu(module, nullptr, &bias); unit != nullptr;
         unit = dwfl_module_nextcu(module, unit, &bias)) {
        if (dwarf_haspc(unit, address - bias) != 1) continue;
        Dwarf_Line* line = dwarf_getsrc_die(unit, address - bias);
        int number = 0;
        const char* file = line != nullptr ? dwarf_linesrc(line, nullptr, nullptr) : nullptr;
        if (file != nullptr && dwarf_lineno(line, &number) == 0) {
            frame.file = file;
            frame.line = number;
        }
        return;
    }
}

int on_frame(Dwfl_Frame* state, void* arg) {
    auto& unwinding = *static_cast<Unwinding*>(arg);
    Dwarf_Addr pc = 0;
    bool is_activation = false;
    if (out_of_time()) {
        unwinding.cut = true;
        return DWARF_CB_ABORT;
    }
    if (!dwfl_frame_pc(state, &pc, &is_activation)) return DWARF_CB_ABORT;
    // A return address points after the call: the call's own line is one byte back.
    const Dwarf_Addr looked_up = is_activation ? pc : pc - 1;
    mpify::StackFrame frame;
    frame.address = pc;
    if (Dwfl_Module* module = dwfl_addrmodule(unwinding.dwfl, looked_up)) {
        if (const char* path = dwfl_module_info(module, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr))
            frame.module = path;
        GElf_Off offset = 0;
        GElf_Sym symbol{};
        if (const char* name = dwfl_module_addrinfo(module, looked_up, &offset, &symbol, nullptr, nullptr, nullptr))
            frame.function = without_symbol_version(demangle(name));
        if (Dwfl_Line* line = dwfl_module_getsrc(module, looked_up)) {
            int number = 0;
            if (const char* file = dwfl_lineinfo(line, nullptr, &number, nullptr, nullptr, nullptr)) {
                frame.file = file;
                frame.line = number;
            }
        } else {
            source_line_without_aranges(module, looked_up, frame);
        }
    }
    unwinding.frames.push_back(std::move(frame));
    return unwinding.frames.size() < max_frames ? DWARF_CB_OK : DWARF_CB_ABORT;
}

// Writes `text` to stdout at once; false if it could not.
bool write_out(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0;
}

// The process's stacks; its record is printed as soon as it is read.
DumpedProcess dump(pid_t pid) {
    DumpedProcess process;
    process.pid = pid;
    static const Dwfl_Callbacks callbacks = [] {
        Dwfl_Callbacks c{};
        c.find_elf = dwfl_linux_proc_find_elf;
        c.find_debuginfo = dwfl_standard_find_debuginfo;
        return c;
    }();
    HeldThreads held(pid);
    if (held.held().empty()) {
        process.error = held.first_error().empty() ? "no thread found" : held.first_error();
        return process;
    }
    // Read while every thread is held: the record as it was where the stacks are; first,
    // for it is what a report of a hang needs most and costs nothing to read.
    process.collectives = read_collective_record(pid, &process.record_ignored);
    std::string record = process.record_ignored.empty() ? "" : record_ignored_line(process.record_ignored);
    for (const mpify::CollectiveCall& call : process.collectives) record += call_line(call);
    write_out(record);  // a failed write shows when the rest is written
    Dwfl* dwfl = dwfl_begin(&callbacks);
    if (dwfl == nullptr) {
        process.error = std::string("dwfl_begin: ") + dwfl_errmsg(-1);
        return process;
    }
    dwfl_report_begin(dwfl);
    const int reported = dwfl_linux_proc_report(dwfl, pid);
    dwfl_report_end(dwfl, nullptr, nullptr);
    if (reported != 0 || dwfl_linux_proc_attach(dwfl, pid, /*assume_ptrace_stopped=*/true) != 0) {
        process.error = std::string("cannot read the process's memory map: ") + dwfl_errmsg(-1);
        dwfl_end(dwfl);
        return process;
    }
    // The process's main thread first (a worker's rank: the one a report shows first), in
    // case time runs out.
    const std::set<pid_t> held_tids = held.held();
    std::vector<pid_t> tids(held_tids.begin(), held_tids.end());
    std::stable_partition(tids.begin(), tids.end(), [pid](pid_t tid) { return tid == pid; });
    bool cut = false;  // some thread's frames, or all of them, left out at the deadline
    for (const pid_t tid : tids) {
        mpify::ThreadStack thread;
        thread.tid = tid;
        thread.name = thread_name(pid, tid);
        Unwinding unwinding;
        unwinding.dwfl = dwfl;
        unwinding.cut = out_of_time();
        // An error at the outermost frame is how some stacks end: what was read is kept.
        if (!unwinding.cut) dwfl_getthread_frames(dwfl, tid, on_frame, &unwinding);
        cut = cut || unwinding.cut;
        thread.frames = std::move(unwinding.frames);
        process.threads.push_back(std::move(thread));
    }
    if (cut) process.error = "not read in full: the time given ran out while the stacks were unwound";
    dwfl_end(dwfl);
    return process;
}

}  // namespace

int main(int argc, char** argv) {
    int first_pid = 1;
    if (argc > 2 && std::strcmp(argv[1], "--within") == 0) {
        deadline = Clock::now() + std::chrono::milliseconds(std::atol(argv[2]));
        first_pid = 3;
    }
    if (argc <= first_pid) {
        std::fprintf(stderr, "usage: mpify-stacks [--within MILLISECONDS] PID...\n");
        return 2;
    }
    // Each process: its first line, its record (as soon as it is read), its threads, then
    // what of it could not be read.
    bool written = true;
    for (int i = first_pid; i < argc; ++i) {
        const pid_t pid = static_cast<pid_t>(std::atoi(argv[i]));
        written = write_out(process_line(pid, "")) && written;
        const DumpedProcess process = dump(pid);
        std::string text;
        for (const mpify::ThreadStack& thread : process.threads) text += thread_lines(thread);
        if (!process.error.empty()) text += error_line(process.error);
        written = write_out(text) && written;
    }
    return written ? 0 : 1;
}
