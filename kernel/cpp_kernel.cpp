#include "cpp_kernel.hpp"

#include "cell.hpp"
#include "cell_tensor_memory.hpp"
#include "cpp_text.hpp"
#include "rank_cell.hpp"
#include "recovery.hpp"
#include "standard_input.hpp"

#include <xeus/xhelper.hpp>
#include <xeus/xinput.hpp>

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#ifndef MPIFY_KERNEL_VERSION
#define MPIFY_KERNEL_VERSION "0"
#endif

extern char** environ;

namespace mpify_kernel {
namespace {

CppKernel* running_kernel = nullptr;

// What xeus-cling's sessions have without an #include (cling's runtime and value printing
// bring them in): a cell may use std::cout, std::string, the containers and <algorithm>
// straight away, as notebooks written for xeus-cling do.
const char* const prelude =
    "#include <algorithm>\n#include <array>\n#include <cmath>\n#include <cstdio>\n#include <cstdlib>\n"
    "#include <cstring>\n#include <deque>\n#include <functional>\n#include <iomanip>\n#include <iostream>\n"
    "#include <iterator>\n#include <list>\n#include <map>\n#include <memory>\n#include <numeric>\n"
    "#include <queue>\n#include <set>\n#include <sstream>\n#include <stack>\n#include <stdexcept>\n"
    "#include <string>\n#include <tuple>\n#include <unordered_map>\n#include <unordered_set>\n"
    "#include <utility>\n#include <vector>\n";

std::string absolute(const std::string& path) {
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) == nullptr) return path;
    return resolved;
}

bool file_exists(const std::string& path) {
    struct stat info{};
    return ::stat(path.c_str(), &info) == 0;
}

std::string working_folder() {
    char here[PATH_MAX];
    return ::getcwd(here, sizeof here) ? here : ".";
}

std::vector<std::string> diagnostic_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.find("<<< inputs >>>") == std::string::npos) lines.push_back(line);  // clang's wrapper file
    return lines;
}

// The diagnostic's first error line, without the "input_line_N:L:C: " position.
std::string first_error(const std::vector<std::string>& diagnostics, const std::string& fallback) {
    for (const std::string& line : diagnostics) {
        const std::size_t at = line.find("error: ");
        if (at != std::string::npos) return line.substr(at + 7);
    }
    return fallback;
}

// Jupyter counts cursor positions in Unicode code points; std::string holds UTF-8 bytes.
std::size_t byte_offset(const std::string& text, int code_points) {
    std::size_t i = 0;
    for (int seen = 0; i < text.size() && seen < code_points; ++seen) {
        ++i;
        while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) ++i;
    }
    return i;
}

int code_points(const std::string& text, std::size_t bytes) {
    int count = 0;
    for (std::size_t i = 0; i < bytes && i < text.size(); ++i)
        if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++count;
    return count;
}

// The (possibly qualified) name around the cursor: "std::vec|tor" -> "std::vector".
std::string name_at(const std::string& code, std::size_t cursor) {
    auto part_of_name = [&](std::size_t i) {
        const char c = code[i];
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
    };
    std::size_t begin = std::min(cursor, code.size()), end = begin;
    while (begin > 0 && part_of_name(begin - 1)) --begin;
    while (end < code.size() && part_of_name(end)) ++end;
    std::string name = code.substr(begin, end - begin);
    while (!name.empty() && name.back() == ':') name.pop_back();
    return name;
}

}  // namespace

CppKernel::CppKernel(std::vector<std::string> compiler_flags) {
    // -L<dir> is the kernel's, not clang's: where #pragma cling load looks first (the
    // kernelspec names mpify's own library folder), as its -I folders come before those a
    // notebook adds: the kernel's mpify, headers and libraries alike.
    for (std::string& flag : compiler_flags) {
        if (flag.rfind("-L", 0) == 0 && flag.size() > 2) kernel_library_path_.push_back(flag.substr(2));
        else compiler_flags_.push_back(std::move(flag));
    }
    xeus::register_interpreter(this);
    running_kernel = this;
}

CppKernel::~CppKernel() {
    if (running_kernel == this) running_kernel = nullptr;
}

CppKernel* CppKernel::instance() { return running_kernel; }

void CppKernel::configure_impl() {
    engine_ = std::make_unique<CppEngine>(compiler_flags_);
    const Outcome ready = engine_->run_trusted(prelude);
    if (ready.kind != Outcome::Kind::ok)
        throw std::runtime_error("the kernel's standard headers do not compile: " + ready.diagnostics + ready.message);
    input_ = std::make_unique<StandardInput>([this] { return read_line(); });
}

nl::json CppKernel::execute_request_impl(int execution_counter, const std::string& code, bool, bool, nl::json,
                                         bool allow_stdin) {
    // Captured from the first cell on: what xeus prints while it starts belongs in the
    // kernel's log, not in a cell. Made with SIGINT blocked, so its reader never takes it.
    if (!output_)
        output_ = std::make_unique<OutputCapture>([this](const std::string& stream,
                                                         const std::string& text) { publish_stream(stream, text); },
                                                  publish_lock_);
    execution_count_ = execution_counter;
    allow_stdin_ = allow_stdin;
    result_.reset();
    input_->begin_cell();
    begin_cell_signals();
    output_->begin_cell();
    nl::json reply;
    try {
        reply = run_cell(code);
    } catch (const std::exception& e) {  // the kernel's own trouble (out of memory, ...)
        reply = reply_error("KernelError", e.what(), {e.what()});
    }
    output_->end_cell();
    return reply;
}

nl::json CppKernel::run_cell(const std::string& text) {
    Cell cell;
    try {
        cell = parse_cell(text);
    } catch (const std::invalid_argument& e) {
        return reply_error("SyntaxError", e.what(), {e.what()});
    }
    switch (cell.kind) {
        case Cell::Kind::file: return write_file(cell);
        case Cell::Kind::help: return help(cell.help_name);
        case Cell::Kind::code:
        case Cell::Kind::rank_library: break;
    }
    const nl::json directives = run_directives(cell);
    if (directives["status"] != "ok") return directives;
    // Before the code runs, after the loads above (one may have brought mpify in).
    prepare_cell_for_interrupts();
    if (cell.kind == Cell::Kind::rank_library) return run_rank_library(cell);
    const CellTensorMemory tensor_memory;
    return run_code(cell);
}

nl::json CppKernel::write_file(const Cell& cell) {
    const bool existed = file_exists(cell.file->name);
    std::ofstream out(cell.file->name, std::ios::binary | std::ios::trunc);
    out << cell.file->content;
    out.close();
    if (!out) {
        const std::string message = "%%file " + cell.file->name + ": cannot write the file";
        return reply_error("FileError", message, {message});
    }
    publish_stream("stdout", (existed ? "Overwriting " : "Writing ") + cell.file->name + "\n");
    return xeus::create_successful_reply();
}

nl::json CppKernel::run_directives(const Cell& cell) {
    for (const Directive& directive : cell.directives) {
        try {
            switch (directive.kind) {
                case Directive::Kind::add_include_path: engine_->add_include_path(absolute(directive.argument)); break;
                case Directive::Kind::add_library_path: library_path_.push_back(absolute(directive.argument)); break;
                case Directive::Kind::load: {
                    std::vector<std::string> search = kernel_library_path_;
                    search.insert(search.end(), library_path_.begin(), library_path_.end());
                    const std::string library = find_library(directive.argument, search);
                    engine_->load_library(library);
                    loaded_libraries_.push_back(absolute(library));
                    break;
                }
            }
        } catch (const std::exception& e) {
            const std::string message = "line " + std::to_string(directive.line) + ": " + e.what();
            return reply_error("PragmaError", message, {message});
        }
    }
    return xeus::create_successful_reply();
}

nl::json CppKernel::run_code(const Cell& cell) {
    for (const std::string& header : cell.headers) {
        if (std::find(headers_included_.begin(), headers_included_.end(), header) != headers_included_.end()) continue;
        const Outcome included = engine_->run_trusted("#include <" + header + ">\n");
        if (included.kind != Outcome::Kind::ok) return reply_for(included);
        headers_included_.push_back(header);
    }
    return reply_for(engine_->run(cell.code));
}

nl::json CppKernel::run_rank_library(const Cell& cell) {
    // 1. The cell's macros (-DNAME=VALUE after the magic) and #include block, in the
    //    session: the declarations below need them.
    std::string macros;
    for (const std::string& flag : cell.rank_flags) {
        if (flag.rfind("-D", 0) == 0 && flag.size() > 2) {
            const std::size_t equals = flag.find('=');
            macros += "#define " + flag.substr(2, equals == std::string::npos ? std::string::npos : equals - 2) + " " +
                      (equals == std::string::npos ? "1" : flag.substr(equals + 1)) + "\n";
        } else if (flag.rfind("-U", 0) == 0 && flag.size() > 2) {
            macros += "#undef " + flag.substr(2) + "\n";
        }
    }
    if (!macros.empty()) {
        const Outcome defined = engine_->run_trusted(macros);
        if (defined.kind != Outcome::Kind::ok) return reply_for(defined);
    }
    const LeadingDirectives parts = split_leading_directives(cell.code);
    if (!parts.directives.empty()) {
        const Outcome included = engine_->run(parts.directives);
        if (included.kind != Outcome::Kind::ok) return reply_for(included);
    }
    const Outcome mpify_header = engine_->run_trusted("#include <mpify/load_source.hpp>\n");
    if (mpify_header.kind != Outcome::Kind::ok) {
        const std::string message =
            "%%mpify compiles the cell with mpify::load_source: load mpify first, e.g. "
            "#pragma cling add_include_path(\"<mpify>/include\") and #pragma cling load(\"libmpify\")";
        return reply_error("UsageError", message, {message, mpify_header.diagnostics});
    }
    // 2. What the session must declare, checked (and so the cell's errors found) before
    //    the slower compilation of the library.
    Declarations declarations;
    const Outcome checked = engine_->declarations_of(parts.directives.empty() ? cell.code : parts.rest, declarations);
    if (checked.kind != Outcome::Kind::ok) return reply_for(checked);
    // 3. The library, for every rank.
    std::vector<std::string> flags = {"-iquote" + working_folder()};
    for (const std::string& folder : engine_->include_paths()) flags.push_back("-I" + folder);
    std::vector<std::string> link_inputs = loaded_libraries_;
    for (const std::string& flag : cell.rank_flags)
        (flag.rfind("-l", 0) == 0 || flag.find(".so") != std::string::npos || flag.rfind("-L", 0) == 0 ? link_inputs
                                                                                                       : flags)
            .push_back(flag);
    std::string source;
    try {
        source = write_rank_source(cell.code, declarations.functions);
    } catch (const std::exception& e) {
        return reply_error("FileError", e.what(), {e.what()});
    }
    const Outcome compiled = engine_->run_trusted(load_source_call(source, flags, link_inputs));
    if (compiled.kind != Outcome::Kind::ok) return reply_for(compiled);
    // 4. The declarations, for the cells that follow.
    const Outcome declared = engine_->run(declarations.code, CppEngine::Definitions::as_written);
    if (declared.kind != Outcome::Kind::ok) return reply_for(declared);
    if (!declarations.functions.empty()) {
        std::string names;
        for (const std::string& name : declarations.functions) names += (names.empty() ? "" : ", ") + name;
        publish_stream("stdout", "compiled for the ranks: " + names + "\n");
    }
    return xeus::create_successful_reply();
}

nl::json CppKernel::help(const std::string& name) {
    std::string text = engine_->describe(name);
    if (text.empty()) text = "nothing named " + name + " is declared in this session\n";
    nl::json bundle = {{"text/plain", text}};
    if (name.rfind("std::", 0) == 0)
        bundle["text/html"] = "<pre>" + text +
                              "</pre><p><a href=\"https://en.cppreference.com/mwiki/index.php?search=" + name +
                              "\" target=\"_blank\">" + name + " on cppreference.com</a></p>";
    const nl::json page = {{"source", "page"}, {"data", bundle}, {"start", 0}};
    return xeus::create_successful_reply(nl::json::array({page}));
}

nl::json CppKernel::reply_for(const Outcome& outcome) {
    std::vector<std::string> diagnostics = diagnostic_lines(outcome.diagnostics);
    switch (outcome.kind) {
        case Outcome::Kind::ok:
            if (!diagnostics.empty()) publish_stream("stderr", outcome.diagnostics);  // warnings
            if (result_) {
                output_->flush();
                std::lock_guard<std::mutex> lock(publish_lock_);
                publish_execution_result(execution_count_, nl::json::parse(*result_), nl::json::object());
                result_.reset();
            }
            return xeus::create_successful_reply();
        case Outcome::Kind::compile_error: {
            if (diagnostics.empty()) diagnostics.push_back(outcome.message);
            const std::string first = first_error(diagnostics, outcome.message);
            return reply_error("CompileError", first, std::move(diagnostics));
        }
        case Outcome::Kind::exception: {
            std::vector<std::string> traceback = {"a C++ exception escaped the cell:",
                                                  outcome.exception_type + ": " + outcome.message};
            for (const std::string& cause : outcome.causes) traceback.push_back("  caused by " + cause);
            return reply_error(outcome.exception_type, outcome.message, std::move(traceback));
        }
        case Outcome::Kind::interrupted:
            return reply_error("Interrupted", "the cell was interrupted; the session goes on",
                               {"Interrupted: the cell was interrupted; what it defined before stays"});
        case Outcome::Kind::crashed:
            return reply_error(outcome.exception_type, outcome.message,
                               {outcome.exception_type + ": " + outcome.message});
    }
    return xeus::create_successful_reply();
}

nl::json CppKernel::reply_error(const std::string& name, const std::string& value, std::vector<std::string> traceback) {
    output_->flush();  // what the cell printed comes before its error
    {
        std::lock_guard<std::mutex> lock(publish_lock_);
        publish_execution_error(name, value, traceback);
    }
    // Built here: xeus 2.4's create_error_reply swaps ename and evalue.
    return nl::json{{"status", "error"}, {"ename", name}, {"evalue", value}, {"traceback", traceback}};
}

void CppKernel::display(const std::string& data, const std::string& metadata, const std::string& display_id,
                        bool update) {
    output_->flush();
    nl::json transient = nl::json::object();
    if (!display_id.empty()) transient["display_id"] = display_id;
    nl::json parsed_metadata = metadata.empty() ? nl::json::object() : nl::json::parse(metadata);
    std::lock_guard<std::mutex> lock(publish_lock_);
    if (update) update_display_data(nl::json::parse(data), std::move(parsed_metadata), std::move(transient));
    else display_data(nl::json::parse(data), std::move(parsed_metadata), std::move(transient));
}

void CppKernel::set_result(const std::string& data) { result_ = data; }

void CppKernel::clear_cell_output(bool wait) {
    output_->flush();
    std::lock_guard<std::mutex> lock(publish_lock_);
    clear_output(wait);
}

std::optional<std::string> CppKernel::read_line() {
    if (!allow_stdin_) return std::nullopt;
    output_->flush();  // the prompt the cell printed comes first
    return xeus::blocking_input_request("", false);
}

nl::json CppKernel::complete_request_impl(const std::string& code, int cursor_pos) {
    const std::size_t cursor = byte_offset(code, cursor_pos);
    const Completions completions = engine_->complete(code, cursor);
    return xeus::create_complete_reply(completions.names, code_points(code, completions.start), cursor_pos);
}

nl::json CppKernel::inspect_request_impl(const std::string& code, int cursor_pos, int) {
    const std::string name = name_at(code, byte_offset(code, cursor_pos));
    if (name.empty()) return xeus::create_inspect_reply();
    const std::string text = engine_->describe(name);
    if (text.empty()) return xeus::create_inspect_reply();
    return xeus::create_inspect_reply(true, nl::json{{"text/plain", text}});
}

nl::json CppKernel::is_complete_request_impl(const std::string& code) {
    const std::string status = completeness(code);
    return xeus::create_is_complete_reply(status, status == "incomplete" ? "    " : "");
}

nl::json CppKernel::kernel_info_request_impl() {
    return xeus::create_info_reply("5.3", "mpify-kernel", MPIFY_KERNEL_VERSION, "c++", "17", "text/x-c++src", ".cpp",
                                   "c++", "text/x-c++src", "",
                                   "mpify's C++17 kernel: clang 19's incremental interpreter over xeus");
}

void CppKernel::shutdown_request_impl() { remove_rank_sources(); }

}  // namespace mpify_kernel

// For the headers cells include (kernel/include), found by the JIT or with dlsym.
#define MPIFY_KERNEL_EXPORT extern "C" __attribute__((visibility("default")))

MPIFY_KERNEL_EXPORT void mpify_kernel_publish_display(const char* data, const char* metadata, const char* display_id,
                                                      int update) {
    if (mpify_kernel::CppKernel* kernel = mpify_kernel::CppKernel::instance())
        kernel->display(data ? data : "{}", metadata ? metadata : "{}", display_id ? display_id : "", update != 0);
}

MPIFY_KERNEL_EXPORT void mpify_kernel_publish_result(const char* data) {
    if (mpify_kernel::CppKernel* kernel = mpify_kernel::CppKernel::instance()) kernel->set_result(data ? data : "{}");
}

MPIFY_KERNEL_EXPORT void mpify_kernel_clear_output(int wait) {
    if (mpify_kernel::CppKernel* kernel = mpify_kernel::CppKernel::instance()) kernel->clear_cell_output(wait != 0);
}

MPIFY_KERNEL_EXPORT int mpify_kernel_system(const char* command) {
    std::fflush(nullptr);
    const char* argv[] = {"/bin/sh", "-c", command ? command : "", nullptr};
    pid_t pid = -1;
    if (::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) {
        std::fprintf(stderr, "!%s: cannot start /bin/sh\n", command);
        return 127;
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        // Interrupted: the command gets the interrupt too (Jupyter signals the kernel's
        // process group); wait for it to end.
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0) std::fprintf(stderr, "!%s: exit status %d\n", command, code);
    std::fflush(stderr);
    return code;
}
