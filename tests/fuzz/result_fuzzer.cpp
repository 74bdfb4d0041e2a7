// libFuzzer target: a rank's result as the caller reads it (ranch.hpp's read_result over
// from_blob), for plain values and the standard types mpify adds (optional, variant,
// tuple). Either a whole value, or a WorkerError naming the rank. Boost's strings and
// containers are left out: Boost sizes them from the count it reads before reading their
// bytes (see docs/failure-and-security.md).
#include <mpify/error.hpp>
#include <mpify/ranch.hpp>
#include <mpify/std_types.hpp>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>

namespace {

using Mixed = std::tuple<int, std::optional<double>, std::variant<long, float, std::optional<int>>>;

template <class Result>
void read_back(std::string_view blob) {
    try {
        const Result value = mpify::detail::read_result<Result>(blob, nullptr, 2, 1);
        // A value it accepted is whole: written again and read back, it is the same. (Not
        // byte for byte the input: Boost ignores the class versions it reads.)
        const std::string again = mpify::detail::to_blob(value);
        if (mpify::detail::to_blob(mpify::detail::read_result<Result>(again, nullptr, 2, 1)) != again) std::abort();
    } catch (const mpify::WorkerError& e) {
        if (e.failures().size() != 1 || e.failures().front().rank != 1) std::abort();
    }
}

}  // namespace

MPIFY_BEGIN_DETAIL_NAMESPACE
// The label of the call in the message: no registry here.
std::string call_label(const void*, int n, const char* api) {
    return std::string(api) + "(fuzzed, n=" + std::to_string(n) + ")";
}
MPIFY_END_DETAIL_NAMESPACE

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string_view blob(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 5) {
        case 0: read_back<int>(blob); break;
        case 1: read_back<double>(blob); break;
        case 2: read_back<std::optional<long>>(blob); break;
        case 3: read_back<std::variant<int, double, std::optional<float>>>(blob); break;
        default: read_back<Mixed>(blob); break;
    }
    return 0;
}
