#include "cpp_kernel.hpp"

#include "cell.hpp"
#include "interrupt.hpp"

#include <xeus/xhelper.hpp>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>

#ifndef MPIFY_KERNEL_VERSION
#define MPIFY_KERNEL_VERSION "0"
#endif

namespace mpify_kernel {
namespace {

CppKernel* running_kernel = nullptr;

std::string absolute(const std::string& path) {
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) == nullptr) return path;
    return resolved;
}

bool file_exists(const std::string& path) {
    struct stat info {};
    return ::stat(path.c_str(), &info) == 0;
}

std::vector<std::string> lines_of(const std::string& text) {
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

}  // namespace

CppKernel::CppKernel(std::vector<std::string> compiler_flags) : compiler_flags_(std::move(compiler_flags)) {
    xeus::register_interpreter(this);
    running_kernel = this;
}

CppKernel::~CppKernel() {
    if (running_kernel == this) running_kernel = nullptr;
}

CppKernel* CppKernel::instance() { return running_kernel; }

void CppKernel::configure_impl() { engine_ = std::make_unique<CppEngine>(compiler_flags_); }

nl::json CppKernel::execute_request_impl(int, const std::string& code, bool, bool, nl::json, bool) {
    // Captured from the first cell on: what xeus prints while it starts belongs in the
    // kernel's log, not in a cell. Made before SIGINT is unblocked, so its reader never
    // takes SIGINT.
    if (!output_)
        output_ = std::make_unique<OutputCapture>(
            [this](const std::string& stream, const std::string& text) { publish_stream(stream, text); },
            publish_lock_);
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

    if (cell.file) {
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

    for (const Directive& directive : cell.directives) {
        try {
            switch (directive.kind) {
                case Directive::Kind::add_include_path: engine_->add_include_path(absolute(directive.argument)); break;
                case Directive::Kind::add_library_path: library_path_.push_back(absolute(directive.argument)); break;
                case Directive::Kind::load: engine_->load_library(find_library(directive.argument, library_path_)); break;
            }
        } catch (const std::exception& e) {
            const std::string message = "line " + std::to_string(directive.line) + ": " + e.what();
            return reply_error("PragmaError", message, {message});
        }
    }
    // Before the code runs, after the loads above (one may have brought mpify in).
    prepare_cell_for_interrupts();

    const Outcome outcome = engine_->run(cell.code);
    std::vector<std::string> diagnostics = lines_of(outcome.diagnostics);
    switch (outcome.kind) {
        case Outcome::Kind::ok:
            if (!diagnostics.empty()) publish_stream("stderr", outcome.diagnostics);  // warnings
            return xeus::create_successful_reply();
        case Outcome::Kind::compile_error:
        {
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
    if (update)
        update_display_data(nl::json::parse(data), std::move(parsed_metadata), std::move(transient));
    else
        display_data(nl::json::parse(data), std::move(parsed_metadata), std::move(transient));
}

nl::json CppKernel::complete_request_impl(const std::string& code, int cursor_pos) {
    const std::size_t cursor = byte_offset(code, cursor_pos);
    const Completions completions = engine_->complete(code, cursor);
    return xeus::create_complete_reply(completions.names, code_points(code, completions.start), cursor_pos);
}

nl::json CppKernel::inspect_request_impl(const std::string&, int, int) { return xeus::create_inspect_reply(); }

nl::json CppKernel::is_complete_request_impl(const std::string& code) {
    const std::string status = completeness(code);
    return xeus::create_is_complete_reply(status, status == "incomplete" ? "    " : "");
}

nl::json CppKernel::kernel_info_request_impl() {
    return xeus::create_info_reply("5.3", "mpify-kernel", MPIFY_KERNEL_VERSION, "c++", "17", "text/x-c++src", ".cpp",
                                   "c++", "text/x-c++src", "",
                                   "mpify's C++17 kernel: clang 19's incremental interpreter over xeus");
}

void CppKernel::shutdown_request_impl() {}

}  // namespace mpify_kernel

/// For xcpp::display in cells (kernel/include/xcpp/xdisplay.hpp), found with dlsym.
extern "C" __attribute__((visibility("default"))) void mpify_kernel_publish_display(const char* data,
                                                                                  const char* metadata,
                                                                                  const char* display_id, int update) {
    if (mpify_kernel::CppKernel* kernel = mpify_kernel::CppKernel::instance())
        kernel->display(data ? data : "{}", metadata ? metadata : "{}", display_id ? display_id : "", update != 0);
}
