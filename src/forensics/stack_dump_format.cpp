#include "forensics/stack_dump_format.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// Tabs and line ends inside a field (a demangled name, a path) become spaces: the
// format's separators stay unambiguous, and nothing read back is worse than a space.
std::string field(const std::string& text) {
    std::string out = text;
    for (char& c : out)
        if (c == '\t' || c == '\n' || c == '\r') c = ' ';
    return out;
}

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> fields;
    std::size_t start = 0;
    while (true) {
        const std::size_t tab = line.find('\t', start);
        fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
        if (tab == std::string::npos) return fields;
        start = tab + 1;
    }
}

}  // namespace

std::string process_line(int pid, const std::string& error) {
    return fmt::format("process\t{}\t{}\n", pid, field(error));
}

std::string call_line(const CollectiveCall& call) {
    return fmt::format("call\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.3f}\t{}\n", call.sequence, field(call.operation),
                       field(call.dtype), call.elements, call.bytes, field(call.detail), field(call.site), call.bucket,
                       call.started_seconds_ago, call.ended ? fmt::format("{:.3f}", call.ended_seconds_ago) : "-");
}

std::string record_ignored_line(const std::string& why) { return fmt::format("record-ignored\t{}\n", field(why)); }

std::string thread_lines(const ThreadStack& thread) {
    std::string text = fmt::format("thread\t{}\t{}\n", thread.tid, field(thread.name));
    for (const StackFrame& frame : thread.frames)
        text += fmt::format("frame\t{:x}\t{}\t{}\t{}\t{}\n", frame.address, field(frame.function), field(frame.file),
                            frame.line, field(frame.module));
    return text;
}

std::string error_line(const std::string& error) { return fmt::format("error\t{}\n", field(error)); }

std::string format_stack_dump(const std::vector<DumpedProcess>& processes) {
    std::string text;
    for (const DumpedProcess& process : processes) {
        text += process_line(process.pid, process.error);
        if (!process.record_ignored.empty()) text += record_ignored_line(process.record_ignored);
        for (const CollectiveCall& call : process.collectives) text += call_line(call);
        for (const ThreadStack& thread : process.threads) text += thread_lines(thread);
    }
    return text;
}

std::vector<DumpedProcess> parse_stack_dump(const std::string& text) {
    std::vector<DumpedProcess> processes;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        const std::vector<std::string> fields = split_tabs(line);
        if (fields[0] == "process" && fields.size() == 3) {
            processes.emplace_back();
            processes.back().pid = std::atoi(fields[1].c_str());
            processes.back().error = fields[2];
        } else if (fields[0] == "call" && fields.size() == 11 && !processes.empty()) {
            CollectiveCall call;
            call.sequence = std::strtoull(fields[1].c_str(), nullptr, 10);
            call.operation = fields[2];
            call.dtype = fields[3];
            call.elements = std::strtoll(fields[4].c_str(), nullptr, 10);
            call.bytes = std::strtoull(fields[5].c_str(), nullptr, 10);
            call.detail = fields[6];
            call.site = fields[7];
            call.bucket = std::atoi(fields[8].c_str());
            call.started_seconds_ago = std::strtod(fields[9].c_str(), nullptr);
            call.ended = fields[10] != "-";
            if (call.ended) call.ended_seconds_ago = std::strtod(fields[10].c_str(), nullptr);
            processes.back().collectives.push_back(std::move(call));
        } else if (fields[0] == "record-ignored" && fields.size() == 2 && !processes.empty()) {
            processes.back().record_ignored = fields[1];
        } else if (fields[0] == "error" && fields.size() == 2 && !processes.empty()) {
            processes.back().error = fields[1];
        } else if (fields[0] == "thread" && fields.size() == 3 && !processes.empty()) {
            ThreadStack thread;
            thread.tid = std::atoi(fields[1].c_str());
            thread.name = fields[2];
            processes.back().threads.push_back(std::move(thread));
        } else if (fields[0] == "frame" && fields.size() == 6 && !processes.empty() &&
                   !processes.back().threads.empty()) {
            StackFrame frame;
            frame.address = std::strtoull(fields[1].c_str(), nullptr, 16);
            frame.function = fields[2];
            frame.file = fields[3];
            frame.line = std::atoi(fields[4].c_str());
            frame.module = fields[5];
            processes.back().threads.back().frames.push_back(std::move(frame));
        }
    }
    return processes;
}

MPIFY_END_DETAIL_NAMESPACE
