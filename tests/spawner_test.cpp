// The warm template: what it forks, and how it is replaced. (Every other test of the
// suite runs once with each spawner; these only make sense with the template.)
#include "functions.hpp"
#include "support.hpp"
#include "tensor_functions.hpp"

#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

using Catch::Contains;

namespace {

mpify::Options from_template() {
    mpify::Options options;
    options.spawner = mpify::Spawner::warm_template;
    return options;
}

std::vector<pid_t> live_templates() { return mpify_test::warm_templates_of(::getpid()); }

// Copies `from` over `to` as a linker does: a new file renamed into place.
void replace_file(const std::string& from, const std::string& to) {
    const std::string next = to + ".next";
    std::filesystem::copy_file(from, next, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(next, to);
}

template <class Fn>
Fn* function_in(const std::string& library, const char* accessor) {
    void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL);
    REQUIRE(handle != nullptr);
    auto get = reinterpret_cast<Fn* (*)()>(::dlsym(handle, accessor));
    REQUIRE(get != nullptr);
    return get();
}

}  // namespace

TEST_CASE("workers forked from the template are distinct processes with one thread that can run OpenMP",
          "[template][own_process]") {
    mpify::Options options = from_template();
    options.caller_rank = std::nullopt;
    const std::vector<in_library::WorkerFacts> facts = mpify::ranch(options, 3, in_library::worker_facts, 2);
    std::set<long> pids;
    for (const auto& f : facts) {
        INFO("worker " << f.pid);
        pids.insert(f.pid);
        CHECK(f.pid != ::getpid());
        CHECK(f.threads_at_entry == 1);
        CHECK(f.threads_after > 1);
        CHECK(f.result_correct);
    }
    CHECK(pids.size() == 3);
    CHECK(live_templates().size() == 1);
}

TEST_CASE("a template killed between two calls is replaced by the next call", "[template][own_process]") {
    CHECK(mpify::ranch(from_template(), 2, in_library::add, 1, 2) == std::vector<int>{3, 4});
    const std::vector<pid_t> first = live_templates();
    REQUIRE(first.size() == 1);
    REQUIRE(::kill(first.front(), SIGKILL) == 0);
    REQUIRE(mpify_test::wait_for_exit(first.front(), 5000));

    CHECK(mpify::ranch(from_template(), 3, in_library::add, 2, 3) == std::vector<int>{5, 6, 7});
    const std::vector<pid_t> second = live_templates();
    REQUIRE(second.size() == 1);
    CHECK(second.front() != first.front());
    CHECK(mpify_test::has_no_children());  // the dead one was reaped
}

TEST_CASE("a library rebuilt on disk between two calls is loaded fresh", "[template]") {
    mpify_test::TempDir dir;
    const std::string library = dir.path() + "/libversioned.so";
    replace_file(MPIFY_TEST_VERSION_1, library);
    auto* which_version = function_in<int()>(library, "mpify_test_which_version");
    mpify::Options options = from_template();
    options.caller_rank = std::nullopt;  // every rank loads the file from disk
    CHECK(mpify::ranch(options, 2, which_version) == std::vector<int>{1, 1});

    replace_file(MPIFY_TEST_VERSION_2, library);
    CHECK(mpify::ranch(options, 2, which_version) == std::vector<int>{2, 2});
}

TEST_CASE("a function whose type changed in a rebuilt library is refused, with both types", "[robustness]") {
    mpify_test::TempDir dir;
    const std::string library = dir.path() + "/libretyped.so";
    replace_file(MPIFY_TEST_RETYPED_1, library);
    void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL);
    REQUIRE(handle != nullptr);
    auto* address = reinterpret_cast<void* (*)()>(::dlsym(handle, "mpify_test_retyped"));
    REQUIRE(address != nullptr);
    auto* retyped = reinterpret_cast<double (*)()>(address());  // the caller was built with version 1
    mpify::Options options;
    options.caller_rank = std::nullopt;  // every rank loads the file from disk
    CHECK(mpify::ranch(options, 2, retyped) == std::vector<double>{1.5, 1.5});

    replace_file(MPIFY_TEST_RETYPED_2, library);  // rebuilt: now it returns long
    CHECK_THROWS_WITH(mpify::ranch(options, 2, retyped),
                      Contains("'retyped' is long (*)()") && Contains("the caller calls it as double (*)()"));
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a template that a library gave a thread falls back to exec and says why", "[template][own_process]") {
    auto* answer = function_in<int()>(MPIFY_TEST_THREAD_AT_LOAD, "mpify_test_answer_despite_a_thread");
    mpify_test::StderrCapture captured;
    CHECK(mpify::ranch(from_template(), 2, answer) == std::vector<int>{42, 42});
    const std::string log = captured.text();
    CHECK_THAT(log, Contains("by exec, not from the warm template") && Contains("threads"));
    CHECK(mpify::ranch(from_template(), 2, answer) == std::vector<int>{42, 42});  // exec from then on
    CHECK(live_templates().empty());
    // That library only: the other libraries' workers fork from a fresh template again.
    CHECK(mpify::ranch(from_template(), 2, in_library::add, 1, 2) == std::vector<int>{3, 4});
    CHECK(live_templates().size() == 1);
}
