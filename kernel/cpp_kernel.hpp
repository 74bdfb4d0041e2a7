#pragma once
// The Jupyter side of the kernel: xeus's interpreter interface, answered with the cell
// parser (cell.hpp), clang's interpreter (cpp_engine.hpp) and the output streamer
// (output_capture.hpp).
#include "cpp_engine.hpp"
#include "output_capture.hpp"

#include <xeus/xinterpreter.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mpify_kernel {

class CppKernel : public xeus::xinterpreter {
public:
    /// `compiler_flags` as for CppEngine.
    explicit CppKernel(std::vector<std::string> compiler_flags);
    ~CppKernel() override;

    /// Sends display_data (or update_display_data) for a cell's xcpp::display: the
    /// output printed before it goes first. `data` and `metadata` are JSON objects.
    void display(const std::string& data, const std::string& metadata, const std::string& display_id, bool update);

    /// The kernel running in this process (display needs it), or nullptr.
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
    nl::json reply_error(const std::string& name, const std::string& value, std::vector<std::string> traceback);

    std::vector<std::string> compiler_flags_;
    std::unique_ptr<CppEngine> engine_;  // made by configure_impl: clang starts after the sockets
    std::mutex publish_lock_;            // xeus's sockets are not thread-safe
    std::unique_ptr<OutputCapture> output_;
    std::vector<std::string> library_path_;  // #pragma cling add_library_path, in order
};

}  // namespace mpify_kernel
