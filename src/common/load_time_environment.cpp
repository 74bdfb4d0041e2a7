#include "common/load_time_environment.hpp"

#include <algorithm>
#include <iterator>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

constexpr const char* load_time_prefixes[] = {"LD_",  "GLIBC_TUNABLES=", "MALLOC_", "OMP_", "GOMP_", "KMP_",
                                              "MKL_", "OPENBLAS_"};

}  // namespace

bool read_at_load(const std::string& entry) {
    return std::any_of(std::begin(load_time_prefixes), std::end(load_time_prefixes),
                       [&](const char* prefix) { return entry.rfind(prefix, 0) == 0; });
}

std::string load_time_signature(const std::vector<std::string>& env) {
    std::vector<std::string> entries;
    std::copy_if(env.begin(), env.end(), std::back_inserter(entries), read_at_load);
    std::sort(entries.begin(), entries.end());
    std::string signature;
    for (const std::string& entry : entries) signature += entry + '\n';
    return signature;
}

MPIFY_END_DETAIL_NAMESPACE
