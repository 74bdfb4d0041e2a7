// Ranks on other machines (Options::placement) through the command launcher. Here the
// "machines" are this one: the command template is "%C", so /bin/sh starts each rank's
// agent right here, which exercises all but the network between machines — the
// connect-back port, the handshake, the agents and their workers, the stand-ins, the
// relayed output, failures, timeouts, interrupts and what is left afterwards.
// (tests/machines/ runs ranks across network namespaces.) The spawner does not matter
// to remote ranks, hence [once].
#include "functions.hpp"
#include "support.hpp"
#include "tensor_functions.hpp"

#include <catch2/catch.hpp>
#include <mpify/version.hpp>
#include <mpify/warm_nodes.hpp>

#include <dlfcn.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace {

mpify::Options on_this_host(int hosts, int per_host) {
    mpify::Options options;
    options.placement = mpify::Placement::by_command("%C", std::vector<std::string>(hosts, "localhost"), per_host);
    return options;
}

std::string host_name() {
    char name[HOST_NAME_MAX + 1] = {};
    ::gethostname(name, sizeof name - 1);
    return name;
}

// The node templates stay between calls (Placement::template_idle); once they are
// stopped, nothing the calls started may be left.
bool no_processes_left() {
    mpify::stop_node_templates();
    return mpify_test::has_no_children();
}

// The path of the library that holds the test functions.
std::string functions_library() {
    Dl_info info{};
    ::dladdr(reinterpret_cast<void*>(&in_library::parent), &info);
    return info.dli_fname != nullptr ? info.dli_fname : "";
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

// The pids the remote workers printed with hang_on_workers' marker line, by rank.
struct PrintedPids {
    std::mutex lock;
    std::vector<pid_t> pids;
    void take(const std::string& line) {
        if (line.rfind("pid ", 0) != 0) return;
        const std::lock_guard<std::mutex> hold(lock);
        pids.push_back(static_cast<pid_t>(std::stol(line.substr(4))));
    }
};

// Runs hang_on_workers with `options`, kills the parent of rank 1's worker once it runs,
// and returns the call's error, which must come within 10 s.
mpify::WorkerError error_once_rank_1s_parent_is_killed(mpify::Options options, std::shared_ptr<PrintedPids> printed) {
    auto killed = std::make_shared<std::atomic<bool>>(false);
    options.on_output = [printed, killed](int rank, mpify::Stream, const std::string& line) {
        printed->take(line);
        if (rank == 1 && line.rfind("pid ", 0) == 0 && !killed->exchange(true))
            ::kill(mpify_test::parent_of(static_cast<pid_t>(std::stol(line.substr(4)))), SIGKILL);
    };
    const auto started = std::chrono::steady_clock::now();
    try {
        mpify::ranch(options, 2, in_library::hang_on_workers, 3);
    } catch (const mpify::WorkerError& e) {
        CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
        return e;
    }
    FAIL("ranch returned");
    throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("ranks placed through a command launcher return their results by rank, their lines tagged with the host",
          "[remote][once]") {
    mpify::Options options = on_this_host(2, 1);
    const std::vector<mpify_test::Report> reports =
        mpify::ranch(options, 3, in_library::report_args, std::string("a"), 2, std::string("c"));
    REQUIRE(reports.size() == 3);
    for (int rank = 1; rank < 3; ++rank) {
        CHECK(reports[rank].local_rank == rank);
        CHECK(reports[rank].pid != ::getpid());
        CHECK(reports[rank].args == std::vector<std::string>{"a", "2", "c"});
    }

    // Only workers, so that only mpify's thread writes into the captured streams.
    options.caller_rank = std::nullopt;
    std::ostringstream out, err;
    auto* old_out = std::cout.rdbuf(out.rdbuf());
    auto* old_err = std::cerr.rdbuf(err.rdbuf());
    try {
        mpify::ranch(options, 2, in_library::print_lines, 2);
    } catch (...) {
        std::cout.rdbuf(old_out);
        std::cerr.rdbuf(old_err);
        throw;
    }
    std::cout.rdbuf(old_out);
    std::cerr.rdbuf(old_err);
    const std::string tag = "[rank 1@" + host_name() + "] ";
    CHECK_THAT(out.str(), Catch::Contains(tag + "line 1 of rank 1\n"));
    CHECK_THAT(out.str(), Catch::Contains(tag + "no newline at the end\n"));
    CHECK_THAT(err.str(), Catch::Contains(tag + "an error line\n"));
    CHECK(no_processes_left());
}

TEST_CASE("two ranks per host, and no caller rank: every rank is remote", "[remote][once]") {
    mpify::Options options = on_this_host(2, 2);
    options.caller_rank = std::nullopt;
    CHECK(mpify::ranch(options, 4, in_library::add, 1, 2) == std::vector<int>{3, 4, 5, 6});  // a + b + rank
    CHECK(no_processes_left());
}

TEST_CASE("a remote rank that throws or crashes fails the call naming its rank, its host and its last lines",
          "[remote][once]") {
    mpify::Options options = on_this_host(2, 1);
    mpify_test::let_crashes_through(options);
    options.relay = mpify::Relay::discard;
    try {
        mpify::ranch(options, 3, in_library::throw_on, 2);
        FAIL("ranch returned");
    } catch (const mpify::WorkerError& e) {
        REQUIRE_FALSE(e.failures().empty());
        CHECK(e.failures()[0].rank == 2);
        CHECK(e.failures()[0].host == host_name());
        CHECK_THAT(e.what(), Catch::Contains("rank 2 on " + host_name() + " threw"));
    }
    try {
        mpify::ranch(options, 3, in_library::crash_on, 1, std::string("segv"));
        FAIL("ranch returned");
    } catch (const mpify::WorkerError& e) {
        REQUIRE_FALSE(e.failures().empty());
        const mpify::RankFailure& failure = e.failures()[0];
        CHECK(failure.rank == 1);
        CHECK(failure.kind == mpify::RankFailure::Kind::signaled);
        CHECK(failure.signal == SIGSEGV);
        REQUIRE_FALSE(failure.stderr_tail.empty());
        CHECK_THAT(failure.stderr_tail.front(), Catch::Contains("rank 1 is about to segv"));
    }
    CHECK(no_processes_left());
}

TEST_CASE("a timeout and an interrupt stop every remote worker, and nothing is left", "[remote][once]") {
    auto printed = std::make_shared<PrintedPids>();
    mpify::Options options = on_this_host(2, 1);
    options.caller_rank = std::nullopt;
    // Room for the remote workers to start and print: twice what a whole call takes here
    // (seconds under a sanitizer), and 2 s more.
    const auto call_began = std::chrono::steady_clock::now();
    REQUIRE(mpify::ranch(options, 2, in_library::add, 1, 2).size() == 2);
    options.timeout =
        2 * std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - call_began) +
        std::chrono::milliseconds(2000);
    options.on_output = [printed](int, mpify::Stream, const std::string& line) { printed->take(line); };
    const auto started = std::chrono::steady_clock::now();
    try {
        mpify::ranch(options, 2, in_library::hang_on_workers, 1);
        FAIL("ranch returned");
    } catch (const mpify::TimeoutError& e) {
        CHECK(e.failures().size() == 2);
        CHECK_THAT(e.what(), Catch::Contains("rank 1 on " + host_name() + " timed out"));
    }
    CHECK(std::chrono::steady_clock::now() - started < options.timeout + std::chrono::seconds(6));
    REQUIRE(printed->pids.size() == 2);
    for (pid_t pid : printed->pids) CHECK(mpify_test::wait_for_exit(pid, 2000));

    auto interrupted_pids = std::make_shared<PrintedPids>();
    auto done = std::make_shared<std::atomic<int>>(0);
    options.timeout = std::chrono::milliseconds(0);
    options.on_output = [interrupted_pids, done](int, mpify::Stream, const std::string& line) {
        interrupted_pids->take(line);
        if (line.rfind("pid ", 0) == 0 && done->fetch_add(1) == 1) mpify::request_interrupt();
    };
    try {
        mpify::ranch(options, 2, in_library::hang_on_workers, 2);
        FAIL("ranch returned");
    } catch (const mpify::Interrupted&) {
    }
    REQUIRE(interrupted_pids->pids.size() == 2);
    for (pid_t pid : interrupted_pids->pids) CHECK(mpify_test::wait_for_exit(pid, 2000));
    CHECK(no_processes_left());
}

TEST_CASE("a remote rank's stack is read on its machine: at a timeout and by mpify::where()", "[remote][once]") {
    mpify::Options options = on_this_host(2, 1);
    const auto call_began = std::chrono::steady_clock::now();
    REQUIRE(mpify::ranch(options, 3, in_library::add, 1, 2).size() == 3);
    // As above: room for the remote workers to start, then their loops time out.
    options.timeout =
        2 * std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - call_began) +
        std::chrono::milliseconds(2000);
    try {
        mpify::ranch(options, 3, in_library::wait_in_own_code, std::string("spin"), std::string());
        FAIL("ranch returned");
    } catch (const mpify::TimeoutError& e) {
        REQUIRE(e.failures().size() == 2);
        for (const mpify::RankFailure& failure : e.failures()) {
            INFO(failure.stack.describe());
            CHECK(failure.stack.host == host_name());
            CHECK_THAT(failure.stack.summary(), Catch::Contains("spin_in_own_loop"));
        }
        CHECK_THAT(e.what(), Catch::Contains("rank 2 on " + host_name() +
                                             " timed out: still running when the "
                                             "timeout expired; where it was: in_library::spin_in_own_loop()"));
    }

    options.timeout = std::chrono::milliseconds(0);
    auto call = std::async(std::launch::async,
                           [options] { return mpify::ranch(options, 3, in_library::loop_until_interrupted); });
    std::vector<mpify::RankStack> stacks;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    auto remote_ranks_in_their_loop = [&] {
        return stacks.size() == 3 && std::all_of(stacks.begin() + 1, stacks.end(), [](const mpify::RankStack& s) {
                   return s.host == host_name() && s.summary().find("spin_in_own_loop") != std::string::npos;
               });
    };
    do {
        stacks = mpify::where();
    } while (!remote_ranks_in_their_loop() && std::chrono::steady_clock::now() < give_up);
    for (const mpify::RankStack& s : stacks) INFO("rank " << s.rank << ": " << s.describe());
    CHECK(remote_ranks_in_their_loop());
    mpify::request_interrupt();
    try {
        call.get();
        FAIL("ranch returned");
    } catch (const mpify::Interrupted& e) {
        CHECK_THAT(e.what(), Catch::Contains("- rank 1: in_library::spin_in_own_loop()"));
    }
    CHECK(no_processes_left());
}

TEST_CASE("a remote rank whose agent is killed is an error naming the rank and host, and the call ends",
          "[remote][once]") {
    auto printed = std::make_shared<PrintedPids>();
    mpify::Options options = on_this_host(2, 1);
    options.caller_rank = std::nullopt;
    options.placement.template_idle = std::chrono::seconds(0);  // an agent of its own, the worker's parent
    const mpify::WorkerError e = error_once_rank_1s_parent_is_killed(options, printed);
    REQUIRE_FALSE(e.failures().empty());
    CHECK(e.failures()[0].rank == 1);
    CHECK(e.failures()[0].kind == mpify::RankFailure::Kind::lost);
    CHECK_THAT(e.what(), Catch::Contains("rank 1 on " + host_name() + " was lost: its connection closed"));
    for (pid_t pid : printed->pids) CHECK(mpify_test::wait_for_exit(pid, 2000));
    CHECK(no_processes_left());
}

TEST_CASE("what a remote rank started ends with it when the call times out", "[remote][once]") {
    auto children = std::make_shared<std::vector<pid_t>>();
    mpify::Options options = on_this_host(2, 1);
    options.caller_rank = std::nullopt;
    options.timeout = std::chrono::seconds(5);
    options.stop_grace = std::chrono::milliseconds(200);
    // With no rank of its own, the caller supervises on this thread: no lock needed.
    options.on_output = [children](int, mpify::Stream, const std::string& line) {
        if (line.rfind("child ", 0) == 0) children->push_back(static_cast<pid_t>(std::stol(line.substr(6))));
    };
    CHECK_THROWS_AS(mpify::ranch(options, 2, in_library::start_a_sleep_then, 0), mpify::TimeoutError);
    REQUIRE(children->size() == 2);  // each started `sleep 30` on its machine (this one, here)
    for (pid_t pid : *children) CHECK(mpify_test::wait_for_exit(pid, 2000));
    CHECK(no_processes_left());
}

TEST_CASE("a launcher that fails is an error with its command and its output, and placements that cannot work are "
          "usage errors",
          "[remote][once]") {
    mpify::Options options = on_this_host(1, 1);
    options.placement.command = "echo no such machine >&2; exit 255 # %C";
    try {
        mpify::ranch(options, 2, in_library::add, 1, 2);
        FAIL("ranch returned");
    } catch (const mpify::SpawnError& e) {
        CHECK_THAT(e.what(), Catch::Contains("the node template for rank 1 on localhost ended before its agent "
                                             "connected back (exit code 255)"));
        CHECK_THAT(e.what(), Catch::Contains("no such machine"));
    }
    options.placement.template_idle = std::chrono::seconds(0);
    try {
        mpify::ranch(options, 2, in_library::add, 1, 2);
        FAIL("ranch returned");
    } catch (const mpify::SpawnError& e) {
        CHECK_THAT(e.what(), Catch::Contains("the launcher of rank 1 on localhost ended before its agent connected "
                                             "back (exit code 255)"));
        CHECK_THAT(e.what(), Catch::Contains("no such machine"));
    }
    options.placement.command = "%C";
    options.placement.hosts = {};
    CHECK_THROWS_WITH(mpify::ranch(options, 2, in_library::add, 1, 2),
                      Catch::Contains("Placement::hosts needs 1 hosts; it has 0"));
    options.placement.hosts = {"localhost"};
    options.placement.command = "ssh %H";
    CHECK_THROWS_WITH(mpify::ranch(options, 2, in_library::add, 1, 2), Catch::Contains("has no %C"));
    options.placement.command = "%C";
    CHECK_THROWS_AS(mpify::ranch(options, 2, in_program::add, 1, 2), mpify::UsageError);
    CHECK(no_processes_left());
}

TEST_CASE("Placement::slurm outside an allocation is a usage error with the salloc line to run", "[remote][once]") {
    const mpify_test::EnvironmentVariable no_job("SLURM_JOB_ID", std::nullopt);
    mpify::Options options;
    options.placement = mpify::Placement::slurm(2);
    CHECK_THROWS_WITH(mpify::ranch(options, 4, in_library::add, 1, 2),
                      Catch::Contains("this process is in none") &&
                          Catch::Contains("salloc --nodes=2 --ntasks-per-node=2"));
    options.placement = mpify::Placement::slurm(1, "12; rm -rf /");
    CHECK_THROWS_WITH(mpify::ranch(options, 2, in_library::add, 1, 2), Catch::Contains("is not a Slurm job id"));
    CHECK(no_processes_left());
}

// A stand-in for Slurm's commands in a folder put first on PATH, each noting its queries:
// squeue answers one node, whose name does not resolve; scontrol gives its NodeAddr as
// 127.0.0.1; srun drops its options and runs the step's command here.
class FakeSlurm {
public:
    FakeSlurm() {
        write_program("squeue", "echo squeue >> '" + queries_file() + "'\necho mpify-fake-node\n");
        write_program("scontrol", "echo scontrol >> '" + queries_file() +
                                      "'\necho NodeName=mpify-fake-node Arch=x86_64 NodeAddr=127.0.0.1 State=IDLE\n");
        write_program("srun", "while [ \"${1#-}\" != \"$1\" ]; do shift; done\nexec \"$@\"\n");
    }
    /// How many times `program` (squeue, scontrol) was run.
    int queries(const std::string& program) const {
        std::ifstream in(queries_file());
        int count = 0;
        for (std::string line; std::getline(in, line);) count += line == program ? 1 : 0;
        return count;
    }

private:
    std::string queries_file() const { return folder_.path() + "/queries.log"; }
    void write_program(const std::string& name, const std::string& body) const {
        const std::string path = folder_.path() + "/" + name;
        std::ofstream(path) << "#!/bin/sh\n" << body;
        ::chmod(path.c_str(), 0755);
    }
    static std::string path_now() {
        const char* path = std::getenv("PATH");
        return path != nullptr ? path : "";
    }
    mpify_test::TempDir folder_;
    const mpify_test::EnvironmentVariable path_{"PATH", folder_.path() + ":" + path_now()};
};

TEST_CASE("Placement::slurm asks Slurm for a named job's nodes once, and again after a failed call", "[remote][once]") {
    const mpify_test::EnvironmentVariable no_job("SLURM_JOB_ID", std::nullopt);
    {
        const FakeSlurm slurm;
        mpify::Options options;
        options.placement = mpify::Placement::slurm(1, "4242");
        for (int call = 0; call < 3; ++call)
            CHECK(mpify::ranch(options, 2, in_library::add, 40, 1) == std::vector<int>{41, 42});
        CHECK(slurm.queries("squeue") == 1);
        CHECK(slurm.queries("scontrol") == 1);
        CHECK_THROWS_WITH(mpify::ranch(options, 2, in_library::throw_on, 1), Catch::Contains("bad value on rank 1"));
        CHECK(slurm.queries("squeue") == 1);  // the failed call used what was found before
        CHECK(mpify::ranch(options, 2, in_library::add, 40, 1) == std::vector<int>{41, 42});
        CHECK(slurm.queries("squeue") == 2);  // the job might have ended: asked again
        CHECK(slurm.queries("scontrol") == 2);
        options.placement = mpify::Placement::slurm(1, "4243");
        CHECK(mpify::ranch(options, 2, in_library::add, 40, 1) == std::vector<int>{41, 42});
        CHECK(slurm.queries("squeue") == 3);    // another job's nodes are its own
        CHECK(slurm.queries("scontrol") == 2);  // the node's address is the same
    }
    CHECK(no_processes_left());
}

TEST_CASE("strangers on the caller's port during a call are refused and the results do not change", "[remote][once]") {
    // Before each agent connects, its launcher has strangers knock: silent, garbage, a
    // proof under another secret, a byte a second (tests/helpers/agent_impostor.py).
    mpify::Options options = on_this_host(2, 1);
    options.placement.command = "python3 " + std::string(MPIFY_TEST_AGENT_IMPOSTOR) + " strangers %C";
    options.placement.template_idle = std::chrono::seconds(0);  // the impostor wraps each rank's agent
    const std::vector<int> sums = mpify::ranch(options, 3, in_library::add, 40, 2);
    CHECK(sums == std::vector<int>{42, 43, 44});  // a + b + rank
    CHECK(no_processes_left());
}

TEST_CASE("a flood of new connections on the caller's port during a 1 + 2 x 2 call locks no agent out",
          "[remote][once]") {
    // Rank 1's launcher starts a stranger that opens connections as fast as one process
    // can until every agent is in, then its agent (tests/helpers/agent_impostor.py flood).
    const mpify_test::TempDir reports;
    const std::string& folder = reports.path();
    mpify::Options options = on_this_host(2, 2);
    options.placement.command = "python3 " + std::string(MPIFY_TEST_AGENT_IMPOSTOR) + " flood " +
                                MPIFY_TEST_CONNECTION_FLOOD + " " + folder + " %C";
    options.placement.template_idle = std::chrono::seconds(0);  // the impostor wraps each rank's agent
    const std::vector<int> sums = mpify::ranch(options, 5, in_library::add, 40, 2);
    CHECK(sums == std::vector<int>{42, 43, 44, 45, 46});  // a + b + rank
    CHECK(no_processes_left());
    std::ifstream report(folder + "/flood");
    double connections = 0, seconds = 1;
    report >> connections >> seconds;
    const double per_second = connections / seconds;
    INFO("the stranger opened " << connections << " connections in " << seconds << " s");
    CHECK(per_second >= 3000);  // the rate at which the port's admission used to lock agents out
}

TEST_CASE("an agent whose mpify was built with another LibTorch is an error naming both versions", "[remote][once]") {
    mpify::Options options = on_this_host(1, 1);
    options.placement.command =
        "python3 " + std::string(MPIFY_TEST_AGENT_IMPOSTOR) + " torch " + MPIFY_VERSION_STRING + " %C";
    options.placement.template_idle = std::chrono::seconds(0);  // the impostor wraps each rank's agent
    try {
        mpify::ranch(options, 2, in_library::add, 1, 2);
        FAIL("ranch returned");
    } catch (const mpify::SpawnError& e) {
        CHECK_THAT(e.what(), Catch::Contains("the agent on impostor-host runs an mpify built with LibTorch "
                                             "0.0.0-impostor, this caller's is built with LibTorch " +
                                             std::string(MPIFY_TORCH_VERSION_STRING)));
    }
    CHECK(no_processes_left());
}

TEST_CASE("an agent of another mpify version is an error naming both versions", "[remote][once]") {
    mpify::Options options = on_this_host(1, 1);
    options.placement.command = "python3 " + std::string(MPIFY_TEST_AGENT_IMPOSTOR) + " version %C";
    options.placement.template_idle = std::chrono::seconds(0);  // the impostor wraps each rank's agent
    try {
        mpify::ranch(options, 2, in_library::add, 1, 2);
        FAIL("ranch returned");
    } catch (const mpify::SpawnError& e) {
        CHECK_THAT(e.what(),
                   Catch::Contains("the agent on impostor-host runs mpify 0.0.0-impostor, this caller mpify " +
                                   std::string(MPIFY_VERSION_STRING)));
    }
    CHECK(no_processes_left());
}

TEST_CASE("a host's node template forks the agents and workers of later calls, and ends when stopped or idle",
          "[remote][once]") {
    mpify::Options options = on_this_host(1, 2);
    options.caller_rank = std::nullopt;
    using Parent = std::pair<int, std::string>;
    const std::vector<Parent> first = mpify::ranch(options, 2, in_library::parent);
    const std::vector<Parent> second = mpify::ranch(options, 2, in_library::parent);
    REQUIRE(first.size() == 2);
    REQUIRE(second.size() == 2);
    const pid_t node_template = first[0].first;
    CHECK(first[0].second == "mpify-node-tmpl");
    CHECK(first[1].first == node_template);  // one template for the host
    CHECK(second[0].first == node_template);  // and the same one, kept between calls
    CHECK(second[1].first == node_template);
    CHECK(alive(node_template));
    mpify::stop_node_templates();
    CHECK(mpify_test::wait_for_exit(node_template, 3000));
    CHECK(mpify_test::has_no_children());

    options.placement.template_idle = std::chrono::seconds(1);
    const pid_t idle_template = mpify::ranch(options, 2, in_library::parent)[0].first;
    CHECK(idle_template != node_template);
    CHECK(mpify_test::wait_for_exit(idle_template, 5000));  // a second without calls ends it
    const std::vector<Parent> after_idle = mpify::ranch(options, 2, in_library::parent);
    CHECK(after_idle[0].second == "mpify-node-tmpl");  // a new template for the next call
    CHECK(after_idle[0].first != idle_template);

    options.placement.template_idle = std::chrono::seconds(0);  // each rank its own launcher and agent
    const std::vector<Parent> without = mpify::ranch(options, 2, in_library::parent);
    CHECK(without[0].second == "mpify-worker");
    CHECK(without[0].first != without[1].first);
    CHECK(no_processes_left());
}

// This process's descendants (children, their children...) named `name` in /proc.
std::vector<pid_t> descendants_named(const std::string& name) {
    std::vector<pid_t> found, frontier{::getpid()};
    while (!frontier.empty()) {
        const pid_t parent = frontier.back();
        frontier.pop_back();
        for (pid_t child : mpify_test::children(parent)) {
            std::ifstream comm("/proc/" + std::to_string(child) + "/comm");
            std::string its_name;
            std::getline(comm, its_name);
            if (its_name == name) found.push_back(child);
            frontier.push_back(child);
        }
    }
    return found;
}

// Whether `pid` maps the file at `path`.
bool maps(pid_t pid, const std::string& path) {
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    for (std::string line; std::getline(maps, line);)
        if (line.find(path) != std::string::npos) return true;
    return false;
}

TEST_CASE("warm_nodes starts each host's node template with the function's library, and the next call uses it",
          "[remote][once]") {
    mpify::stop_node_templates();
    mpify_test::TempDir dir;
    const std::string template_errors = dir.path() + "/node-template.err";
    mpify::Options options;
    // The node template's stderr in a file: what it says of its agents.
    options.placement = mpify::Placement::by_command("%C 2>>" + template_errors, {"localhost", "localhost"}, 2);
    options.caller_rank = std::nullopt;
    mpify::warm_nodes(options, in_library::parent);
    const std::vector<pid_t> warmed = descendants_named("mpify-node-tmpl");
    REQUIRE(warmed.size() == 1);  // one host (named twice), one template
    CHECK(maps(warmed[0], functions_library()));  // loaded before warm_nodes returned

    using Parent = std::pair<int, std::string>;
    const std::vector<Parent> first = mpify::ranch(options, 2, in_library::parent);
    CHECK(first[0].first == warmed[0]);  // the first call's workers come from it
    CHECK(first[1].first == warmed[0]);
    CHECK(no_processes_left());
    std::ifstream said(template_errors);
    const std::string text((std::istreambuf_iterator<char>(said)), std::istreambuf_iterator<char>());
    CHECK(text.find("ended with a failure") == std::string::npos);  // its agents were dismissed, not cut off

    // Nothing to warm: this machine, or node templates turned off. Nothing starts.
    mpify::warm_nodes(mpify::Options{}, in_library::parent);
    options.placement.template_idle = std::chrono::seconds(0);
    mpify::warm_nodes(options, in_library::parent);
    CHECK(mpify_test::children(::getpid()).empty());
    CHECK_THROWS_WITH(mpify::warm_nodes(on_this_host(1, 1), in_program::noop),
                      Catch::Contains("mpify::warm_nodes(noop)") &&
                          Catch::Contains("is compiled into the program itself"));
}

TEST_CASE("a node template that has loaded LibTorch forks agents that do not map it", "[remote][once]") {
    mpify::Options options = on_this_host(1, 2);
    options.caller_rank = std::nullopt;
    // The first call has the template load the library, and LibTorch with it; the
    // agents of the second are forked after that.
    for (int call = 0; call < 2; ++call) {
        const std::vector<std::map<std::string, bool>> seen =
            mpify::ranch(options, 2, in_library::libtorch_mapped_among_siblings);
        for (const auto& mapped : seen) {
            std::ostringstream all;
            for (const auto& [name, torch] : mapped) all << name << ": " << torch << "; ";
            INFO("call " << call << ", the template's children: " << all.str());
            CHECK(mapped.at("mpify-agent") == false);
            CHECK(mapped.at("mpify-forker") == false);
            CHECK(mapped.at("(this rank)") == true);
        }
    }
    CHECK(no_processes_left());
}

TEST_CASE("a node template forks workers ahead of later calls, which serve them as forked ones do", "[remote][once]") {
    mpify::Options options = on_this_host(1, 2);
    // Between calls the template forks spares, one at a time while no request waits: a
    // few calls in a row find them ready.
    std::string log;
    int calls = 0;
    ::setenv("MPIFY_DEBUG", "1", 1);
    for (; calls < 10 && log.find("(forked ahead of the call)") == std::string::npos; ++calls) {
        mpify_test::StderrCapture captured;
        const std::vector<int> sums = mpify::ranch(options, 3, in_library::add, 40, 2);
        log = captured.text();
        CHECK(sums == std::vector<int>{42, 43, 44});  // a + b + rank
    }
    ::unsetenv("MPIFY_DEBUG");
    INFO("the debug log of call " << calls << ":\n" << log);
    CHECK(log.find("rank 1 on ") != std::string::npos);
    CHECK(log.find("(forked ahead of the call)") != std::string::npos);
    const std::vector<mpify_test::Report> reports = mpify::ranch(options, 3, in_library::report);
    for (int rank = 1; rank < 3; ++rank) {
        CHECK(reports[rank].local_rank == rank);
        CHECK(reports[rank].env_local_rank == std::to_string(rank));
        CHECK(reports[rank].process_name == "mpify-worker r" + std::to_string(rank));
    }
    CHECK(no_processes_left());
}

TEST_CASE("a library changed on disk is never served by the node template that loaded it", "[remote][once]") {
    mpify::Options options = on_this_host(1, 1);
    options.caller_rank = std::nullopt;
    const pid_t node_template = mpify::ranch(options, 1, in_library::parent)[0].first;
    // The same bytes, a newer modification time: to the template, another file.
    const std::string library = functions_library();
    REQUIRE_FALSE(library.empty());
    struct stat before{};
    REQUIRE(::stat(library.c_str(), &before) == 0);
    timespec newer[2] = {before.st_atim, before.st_mtim};
    newer[1].tv_sec += 1;
    REQUIRE(::utimensat(AT_FDCWD, library.c_str(), newer, 0) == 0);
    const std::pair<int, std::string> exec_d = mpify::ranch(options, 1, in_library::parent)[0];
    CHECK(exec_d.second == "mpify-agent");  // the worker's parent is its agent, which exec'd it
    CHECK(mpify_test::wait_for_exit(node_template, 5000));  // and the template retired
    const std::pair<int, std::string> renewed = mpify::ranch(options, 1, in_library::parent)[0];
    CHECK(renewed.second == "mpify-node-tmpl");
    CHECK(renewed.first != node_template);
    const timespec back[2] = {before.st_atim, before.st_mtim};
    ::utimensat(AT_FDCWD, library.c_str(), back, 0);
    CHECK(no_processes_left());
}

TEST_CASE("a node template killed mid-call loses the ranks it served, named, and leaves nothing", "[remote][once]") {
    auto printed = std::make_shared<PrintedPids>();
    mpify::Options options = on_this_host(1, 2);
    options.caller_rank = std::nullopt;
    const mpify::WorkerError e = error_once_rank_1s_parent_is_killed(options, printed);  // the template
    REQUIRE_FALSE(e.failures().empty());
    CHECK(e.failures()[0].kind == mpify::RankFailure::Kind::lost);
    CHECK_THAT(e.what(), Catch::Contains("on " + host_name() + " was lost"));
    for (pid_t pid : printed->pids) CHECK(mpify_test::wait_for_exit(pid, 2000));
    // The next call starts a new template.
    CHECK(mpify::ranch(options, 2, in_library::add, 1, 2) == std::vector<int>{3, 4});
    CHECK(no_processes_left());
}
