// A warm template that could not start its workers' way of forking because the machine
// was out of processes for a moment is tried again on a later call: one transient
// failure must not send every later call of the process down the slow exec path.
#include "functions.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace {

// This process in a cgroup (v1 "pids" controller) of its own, whose task limit the test
// sets. Every task of the group counts: this process's threads and its children.
class PidsCgroup {
public:
    static constexpr const char* root = "/sys/fs/cgroup/pids";

    PidsCgroup() : path_(std::string(root) + "/mpify-test-" + std::to_string(::getpid())) {
        if (::access((std::string(root) + "/cgroup.procs").c_str(), W_OK) != 0 || ::mkdir(path_.c_str(), 0700) != 0)
            return;
        usable_ = write(path_ + "/cgroup.procs", std::to_string(::getpid()));
    }
    ~PidsCgroup() {
        if (path_.empty()) return;
        // Back to the root group with every process that is still in this one (a live
        // template), so that the group can be removed.
        std::ifstream procs(path_ + "/cgroup.procs");
        for (std::string pid; std::getline(procs, pid);) write(std::string(root) + "/cgroup.procs", pid);
        ::rmdir(path_.c_str());
    }
    bool usable() const { return usable_; }
    long tasks() const {
        std::ifstream current(path_ + "/pids.current");
        long count = -1;
        current >> count;
        return count;
    }
    void limit(const std::string& max) const { REQUIRE(write(path_ + "/pids.max", max)); }

private:
    static bool write(const std::string& file, const std::string& text) {
        std::ofstream out(file);
        out << text << std::flush;
        return static_cast<bool>(out);
    }
    std::string path_;
    bool usable_ = false;
};

// What this process writes to fd 2 while it exists (mpify logs its fallbacks there).
class CapturedStderr {
public:
    CapturedStderr() : file_(std::tmpfile()), saved_(::dup(2)) {
        REQUIRE(file_ != nullptr);
        ::dup2(::fileno(file_), 2);
    }
    ~CapturedStderr() { restore(); }
    std::string text() {
        restore();
        std::rewind(file_);
        std::string all;
        for (int c; (c = std::fgetc(file_)) != EOF;) all += static_cast<char>(c);
        return all;
    }

private:
    void restore() {
        if (saved_ < 0) return;
        ::dup2(saved_, 2);
        ::close(saved_);
        saved_ = -1;
    }
    std::FILE* file_;
    int saved_;
};

// True when the group can limit processes; else says what it needs (the test is skipped).
bool usable_or_warn(const PidsCgroup& group) {
    if (!group.usable()) WARN("needs root and a writable cgroup v1 pids controller at " << PidsCgroup::root);
    return group.usable();
}

// Workers only (no thread watches them beside the caller's rank) and a load-time
// variable of their own, so that each `flavour` has a template of its own.
mpify::Options workers_only(const std::string& flavour) {
    mpify::Options options;
    options.caller_rank = std::nullopt;
    options.env["OMP_MPIFY_TEMPLATE_RETRY_TEST"] = std::to_string(::getpid()) + "-" + flavour;
    return options;
}

}  // namespace

TEST_CASE("a template whose start found no free process slot is tried again on a later call",
          "[robustness][template]") {
    if (mpify_test::spawner_under_test() != mpify::Spawner::warm_template) return;
    PidsCgroup group;
    if (!usable_or_warn(group)) return;
    // A template made inside the group (and the thread that starts templates), so that
    // the one below replaces a task that counts.
    CHECK(mpify::ranch(workers_only("first"), 1, in_program::add, 1, 2) == std::vector<int>{3});
    const std::size_t templates_before = mpify_test::warm_templates_of(::getpid()).size();

    // No room for one more task: the first template makes way for the new one, which has
    // no room left for the fork of its start-up probe and says so; the call's worker
    // then takes the place the new template gave back.
    group.limit(std::to_string(group.tasks()));
    std::string log;
    {
        CapturedStderr captured;
        CHECK(mpify::ranch(workers_only("second"), 1, in_program::add, 1, 2) == std::vector<int>{3});
        log = captured.text();
    }
    CHECK_THAT(log, Catch::Contains("probing glibc before forking workers: fork:"));

    // Processes to spare again: the next call has a warm template.
    group.limit("max");
    CHECK(mpify::ranch(workers_only("second"), 2, in_program::add, 1, 2) == std::vector<int>{3, 4});
    CHECK(mpify_test::warm_templates_of(::getpid()).size() == templates_before);
    CHECK(mpify_test::has_no_children());
}

TEST_CASE("a fork that finds no process slot gives the template's own slot to an exec'd worker",
          "[robustness][template]") {
    if (mpify_test::spawner_under_test() != mpify::Spawner::warm_template) return;
    PidsCgroup group;
    if (!usable_or_warn(group)) return;
    CHECK(mpify::ranch(workers_only("crowded"), 1, in_program::add, 1, 2) == std::vector<int>{3});
    REQUIRE(mpify_test::warm_templates_of(::getpid()).size() == 1);

    // Room for one task more than now (the template counts): the first worker forks, the
    // second finds no slot; the template makes way and the second worker is exec'd.
    group.limit(std::to_string(group.tasks() + 1));
    std::string log;
    {
        CapturedStderr captured;
        CHECK(mpify::ranch(workers_only("crowded"), 2, in_program::add, 1, 2) == std::vector<int>{3, 4});
        log = captured.text();
    }
    CHECK_THAT(log, Catch::Contains("by exec") && Catch::Contains("clone failed"));
    group.limit("max");
    CHECK(mpify_test::has_no_children());
}
