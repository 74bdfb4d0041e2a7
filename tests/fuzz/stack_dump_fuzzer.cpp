// libFuzzer target: a stack dump as mpify-stacks prints it, or as a remote rank's agent
// sends it over the link. Parsing never fails: it keeps what reads as processes, threads,
// frames and recorded collective calls, and what it keeps prints and parses back to the same.
#include "forensics/stack_dump_format.hpp"

#include <mpify/stack.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace mpify::detail;
    const std::vector<DumpedProcess> read = parse_stack_dump(std::string(reinterpret_cast<const char*>(data), size));
    const std::string printed = format_stack_dump(read);
    if (format_stack_dump(parse_stack_dump(printed)) != printed) std::abort();
    for (const DumpedProcess& process : read) {
        mpify::RankStack stack;
        stack.threads = process.threads;
        stack.unavailable = process.error;
        stack.collectives = process.collectives;
        (void)stack.summary();
        (void)stack.describe();
        mpify::RankStack other = stack;
        other.rank = 1;
        if (!other.collectives.empty()) other.collectives.pop_back();
        (void)mpify::line_up_collectives({stack, other});
    }
    return 0;
}
