#pragma once
// The Jupyter side of the kernel: xeus's interpreter interface, answered with the cell
// parser (cell.hpp), clang's interpreter (cpp_engine.hpp), the output streamer
// (output_capture.hpp) and the rank libraries of %%mpify cells (rank_cell.hpp).
#include "cpp_engine.hpp"
#include "output_capture.hpp"

#include <xeus/xinterpreter.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mpify_kernel {

struct Cell;
class StandardInput;

class CppKernel : public xeus::xinterpreter {
public:
    /// `compiler_flags` as for CppEngine; a -L<dir> among them is a folder #pragma cling load
    /// searches first (before those add_library_path adds), not a compiler flag.
    explicit CppKernel(std::vector<std::string> compiler_flags);
    ~CppKernel() override;

    /// Sends display_data (or update_display_data) for a cell's xcpp::display: the
    /// output printed before it goes first. `data` and `metadata` are JSON objects.
    void display(const std::string& data, const std::string& metadata, const std::string& display_id, bool update);

    /// Keeps `data` (a JSON mime bundle) as the running cell's result (Out[n]), sent when
    /// the cell has run.
    void set_result(const std::string& data);

    /// Clears the running cell's output (xcpp::clear_output).
    void clear_cell_output(bool wait);

    /// One line typed by the user for the running cell's std::cin (an input_request), or
    /// nothing when the front end allows no input.
    std::optional<std::string> read_line();

    /// The kernel running in this process (the cells' helpers need it), or nullptr.
    static CppKernel* instance();

private:
    void configure_impl() override;
    nl::json execute_request_impl(int execution_counter, const std::string& code, bool silent, bool store_history,
                                  nl::json user_expressions, bool allow_stdin) override;
    nl::json complete_request_impl(const std::string& code, int cursor_pos) override;
    nl::json inspect_request_impl(const std::string& code, int cursor_pos, int detail_level) override;
    nl::json is_complete_request_impl(const std::string& code) override;
    nl::json kernel_info_request_impl() override;
    void shutdown_request_impl() override;

    /// Runs one cell; returns the execute_reply (an error was published already).
    nl::json run_cell(const std::string& code);
    nl::json write_file(const Cell& cell);
    nl::json run_directives(const Cell& cell);
    nl::json run_code(const Cell& cell);
    nl::json run_rank_library(const Cell& cell);
    nl::json help(const std::string& name);
    /// The execute_reply for an Outcome (publishing its error, or the cell's result).
    nl::json reply_for(const Outcome& outcome);
    nl::json reply_error(const std::string& name, const std::string& value, std::vector<std::string> traceback);

    std::vector<std::string> compiler_flags_;
    std::unique_ptr<CppEngine> engine_;  // made by configure_impl: clang starts after the sockets
    std::mutex publish_lock_;            // xeus's sockets are not thread-safe
    std::unique_ptr<OutputCapture> output_;
    std::unique_ptr<StandardInput> input_;
    std::vector<std::string> library_path_;     // #pragma cling add_library_path, in order
    std::vector<std::string> kernel_library_path_;  // the kernelspec's -L folders: mpify's own
    std::vector<std::string> loaded_libraries_;  // #pragma cling load, resolved, in order
    std::vector<std::string> headers_included_;  // the kernel's own helper headers, once each
    int execution_count_ = 0;
    bool allow_stdin_ = false;
    std::optional<std::string> result_;  // the running cell's value, a JSON mime bundle
};

}  // namespace mpify_kernel
