// libFuzzer target: DdpOptions::from_environment, the parser of what launchers (torchrun,
// Open MPI, Slurm) put in the environment. The input is a set of variables, one per line:
// a first byte choosing the name among those the parser reads, then the value. Either a
// place in a group that makes sense, or a UsageError.
#include <mpify/ddp_guard.hpp>
#include <mpify/error.hpp>

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>  // environ

namespace {

constexpr const char* names[] = {"NODE_RANK",
                                 "GROUP_RANK",
                                 "NNODES",
                                 "MASTER_ADDR",
                                 "MASTER_PORT",
                                 "OMPI_COMM_WORLD_RANK",
                                 "OMPI_COMM_WORLD_SIZE",
                                 "SLURM_NODEID",
                                 "SLURM_NNODES",
                                 "SLURM_STEP_ID",
                                 "SLURM_NTASKS",
                                 "SLURM_STEP_NODELIST",
                                 "SLURM_JOB_NODELIST",
                                 "SLURM_JOB_ID"};
constexpr std::size_t name_count = std::size(names);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size > 512) return 0;  // a launcher's variables are short; host lists have their own target
    // The environment is built here and `environ` pointed at it: glibc's setenv keeps
    // every value it ever held (on purpose), which millions of runs would pile up.
    static std::vector<std::string> entries;
    static std::vector<char*> pointers;
    entries.clear();
    const std::string input(reinterpret_cast<const char*>(data), size);
    std::size_t at = 0;
    while (at < input.size()) {
        std::size_t end = input.find('\n', at);
        if (end == std::string::npos) end = input.size();
        if (end > at) {
            const std::string value = input.substr(at + 1, end - at - 1);
            // An environment cannot hold a NUL. A name given twice: getenv takes the first,
            // as it would in a real environment.
            const char* name = names[static_cast<unsigned char>(input[at]) % name_count];
            if (value.find('\0') == std::string::npos) entries.push_back(std::string(name) + "=" + value);
        }
        at = end + 1;
    }
    pointers.clear();
    for (std::string& entry : entries) pointers.push_back(entry.data());
    pointers.push_back(nullptr);
    environ = pointers.data();
    try {
        const mpify::DdpOptions options = mpify::DdpOptions::from_environment();
        if (options.nodes < 1 || options.node_rank < 0 || options.node_rank >= options.nodes) std::abort();
        if (options.port < 0 || options.port > 65535) std::abort();
        if (options.nodes > 1 && options.addr.empty()) std::abort();
    } catch (const mpify::UsageError&) {
    }
    return 0;
}
