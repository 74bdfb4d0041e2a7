#include "call/environment.hpp"

#include "contract/process_contract.hpp"

#include <cstdlib>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

std::map<std::string, std::string> worker_variables(const Options& options, int n) {
    std::map<std::string, std::string> variables = options.env;
    // Large blocks from malloc on transparent huge pages: fresh tensors and argument
    // buffers then cost a tenth to fault in (wire/large_buffers.hpp). The user's own
    // GLIBC_TUNABLES, from the environment or Options::env, wins.
    if (variables.count("GLIBC_TUNABLES") == 0 && std::getenv("GLIBC_TUNABLES") == nullptr)
        variables["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1";
    variables["LOCAL_WORLD_SIZE"] = std::to_string(n);
    variables[worker_env_var] = std::to_string(worker_channel_fd);
    return variables;
}

std::map<std::string, std::string> own_rank_variables(const Options& options, int rank, int n) {
    std::map<std::string, std::string> variables = options.env;
    variables["LOCAL_RANK"] = std::to_string(rank);
    variables["LOCAL_WORLD_SIZE"] = std::to_string(n);
    return variables;
}

MPIFY_END_DETAIL_NAMESPACE
