#pragma once
// Functions the tests ranch. functions.cpp is compiled twice: into the test program
// (namespace in_program: the program host re-executes the test binary) and into
// libmpify_test_functions.so (namespace in_library: the mpify-worker host loads it).
#include <mpify/mpify.hpp>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

namespace mpify_test {

/// What a rank saw of itself: the contract of Python mpify's own test.
struct Report {
    int local_rank = -1;
    int local_world_size = -1;
    std::string env_local_rank;
    std::string env_local_world_size;
    int pid = 0;
    std::vector<std::string> args;  // the arguments it received, printed
    std::string process_name;       // what ps shows (/proc/self/comm)

    template <class Archive>
    void serialize(Archive& ar, const unsigned int) {
        ar & local_rank & local_world_size & env_local_rank & env_local_world_size & pid & args & process_name;
    }
};

using Nested = std::map<std::string, std::vector<std::pair<int, std::optional<std::string>>>>;
using Mixed = std::tuple<int, std::string, std::variant<int, std::string>, std::optional<double>>;

/// Sets `active` while it exists, and says so on stdout and stderr.
struct TestContext {
    TestContext();
    ~TestContext();
    static bool active;
};

}  // namespace mpify_test

#define MPIFY_TEST_DECLARE_FUNCTIONS                                                 \
    mpify_test::Report report();                                                     \
    mpify_test::Report report_args(std::string a, int b, const std::string& c);      \
    std::pair<int, std::string> parent(); /* pid and process name of its parent */   \
    int add(int a, int b);                                                           \
    void noop();                                                                     \
    void touch(std::string dir);                                                     \
    std::string echo_string(std::string s);                                          \
    std::vector<double> echo_doubles(std::vector<double> v);                         \
    mpify_test::Nested echo_nested(mpify_test::Nested v);                            \
    mpify_test::Mixed echo_mixed(mpify_test::Mixed v);                               \
    std::size_t byte_count(const std::string& blob);                                 \
    int throw_on(int rank);                                                          \
    int throw_int_on(int rank);                                                      \
    int say_and_throw_on(int rank, std::string text); /* on stderr, and thrown */    \
    int crash_on(int rank, std::string how);                                         \
    int hang_on_workers(int printed_marker);                                         \
    int wait_for_interrupt(int max_seconds);                                         \
    int fail_or_hang(int failing_rank);                                              \
    int root_cause_then_peer(std::string fifo);                                      \
    void print_lines(int count);                                                     \
    bool context_active();                                                           \
    std::string env_of(std::string name);                                            \
    int nested_ranch();                                                              \
    int fail_before_restart(int failing_rank, int failed_attempts, std::string how); \
    int fail_then_wait_for_interrupt(int max_seconds);                               \
    int start_a_sleep_then(int how);                                                 \
    int wait_in_own_code(std::string how, std::string fifo);                         \
    void spin_in_own_loop(); /* until the rank is stopped, in a frame of its own */  \
    int loop_until_interrupted();                                                    \
    bool blocks_signal(int signal);

namespace in_program {
MPIFY_TEST_DECLARE_FUNCTIONS
}
namespace in_library {
MPIFY_TEST_DECLARE_FUNCTIONS
}
