// A machine's place in a group across machines, from its launcher's environment, and
// Slurm's host lists.
#include "spawn/launchers/slurm_hostlist.hpp"

#include <mpify/ddp_guard.hpp>
#include <mpify/error.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

using Catch::Contains;
using mpify::detail::expand_hostlist;

namespace {

using Variables = std::map<std::string, std::string>;

// Sets exactly `variables` among the launchers' names for one scope; the rest unset.
class LauncherEnvironment {
public:
    explicit LauncherEnvironment(const std::map<std::string, std::string>& variables) {
        for (const char* name :
             {"NODE_RANK", "GROUP_RANK", "NNODES", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
              "OMPI_COMM_WORLD_SIZE", "SLURM_NODEID", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_STEP_NODELIST",
              "SLURM_JOB_NODELIST", "SLURM_JOB_ID", "SLURM_STEP_ID"}) {
            const char* old = std::getenv(name);
            saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
            ::unsetenv(name);
        }
        for (const auto& [name, value] : variables) ::setenv(name.c_str(), value.c_str(), 1);
    }
    ~LauncherEnvironment() {
        for (const auto& [name, value] : saved_)
            value ? ::setenv(name.c_str(), value->c_str(), 1) : ::unsetenv(name.c_str());
    }

private:
    std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace

TEST_CASE("Slurm host lists expand as scontrol show hostnames does", "[launcher]") {
    using List = std::vector<std::string>;
    CHECK(expand_hostlist("n[1-2]") == List{"n1", "n2"});
    CHECK(expand_hostlist("gpu[01-04,7],cpu-a[1-2]") ==
          List{"gpu01", "gpu02", "gpu03", "gpu04", "gpu7", "cpu-a1", "cpu-a2"});
    CHECK(expand_hostlist("rack[1-2]-n[08-10]") ==
          List{"rack1-n08", "rack1-n09", "rack1-n10", "rack2-n08", "rack2-n09", "rack2-n10"});
    CHECK(expand_hostlist("login,node[9-11]") == List{"login", "node9", "node10", "node11"});
    CHECK(expand_hostlist("a[098-101]") == List{"a098", "a099", "a100", "a101"});
    CHECK(expand_hostlist("single") == List{"single"});
    CHECK_THROWS_WITH(expand_hostlist("n[1-2"), Contains("'n[1-2' has a '[' without its ']'"));
    CHECK_THROWS_WITH(expand_hostlist("n[3-1]"), Contains("the range 3-1 that runs backwards"));
    CHECK_THROWS_WITH(expand_hostlist("n[1-99999999]"), Contains("more than 100000 hosts"));
    CHECK_THROWS_WITH(expand_hostlist(std::string(200, 'x') + "[1-50000]"), Contains("more than 4194304 characters"));
    CHECK(expand_hostlist("n[00001-100000]").size() == 100000);
    CHECK_THROWS_WITH(expand_hostlist("n[1-x]"), Contains("has 'x' where a number belongs"));
    CHECK_THROWS_WITH(expand_hostlist(""), Contains("names no host"));
}

TEST_CASE("torchrun's names place a machine in the group", "[launcher]") {
    {
        LauncherEnvironment e(Variables{
            {"NODE_RANK", "1"}, {"NNODES", "3"}, {"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "4567"}});
        const auto o = mpify::DdpOptions::from_environment();
        CHECK(o.node_rank == 1);
        CHECK(o.nodes == 3);
        CHECK(o.addr == "10.1.2.3");
        CHECK(o.port == 4567);
    }
    {
        LauncherEnvironment e(Variables{{"GROUP_RANK", "0"}, {"NNODES", "2"}, {"MASTER_ADDR", "m"}});
        CHECK(mpify::DdpOptions::from_environment().port == 29500);
    }
    {
        LauncherEnvironment e(Variables{
            {"NODE_RANK", "1"}, {"GROUP_RANK", "0"}, {"NNODES", "2"}, {"MASTER_ADDR", "m"}});
        CHECK_THROWS_WITH(mpify::DdpOptions::from_environment(), Contains("NODE_RANK=1 and GROUP_RANK=0 disagree"));
    }
    {
        LauncherEnvironment e(Variables{{"NODE_RANK", "2"}, {"NNODES", "2"}, {"MASTER_ADDR", "m"}});
        CHECK_THROWS_WITH(mpify::DdpOptions::from_environment(), Contains("NODE_RANK=2 does not fit NNODES=2"));
    }
    {
        LauncherEnvironment e(Variables{{"NODE_RANK", "0"}, {"NNODES", "2"}});
        CHECK_THROWS_WITH(mpify::DdpOptions::from_environment(), Contains("MASTER_ADDR is not set"));
    }
    {
        LauncherEnvironment e(Variables{{"NODE_RANK", "0"}});
        CHECK_THROWS_WITH(mpify::DdpOptions::from_environment(), Contains("NODE_RANK is set but NNODES is not"));
    }
    {
        LauncherEnvironment e(Variables{{"NODE_RANK", "one"}, {"NNODES", "2"}});
        CHECK_THROWS_WITH(mpify::DdpOptions::from_environment(), Contains("NODE_RANK='one'"));
    }
}

TEST_CASE("Open MPI's mpirun places a machine, and needs the master's address", "[launcher]") {
    {
        LauncherEnvironment e(Variables{
            {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"MASTER_ADDR", "h0"}});
        const auto o = mpify::DdpOptions::from_environment();
        CHECK(o.node_rank == 1);
        CHECK(o.nodes == 2);
        CHECK(o.addr == "h0");
        CHECK(o.port == 29500);
    }
    LauncherEnvironment e(Variables{{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
    CHECK_THROWS_WITH(mpify::DdpOptions::from_environment(),
                      Contains("MASTER_ADDR is not set; Open MPI does not say which host runs rank 0") &&
                          Contains("mpirun -x MASTER_ADDR="));
}

TEST_CASE("Slurm's srun places a machine; the master is the first node of the step", "[launcher]") {
    {
        LauncherEnvironment e(Variables{{"SLURM_NODEID", "1"},
                                        {"SLURM_NNODES", "4"},
                                        {"SLURM_NTASKS", "4"},
                                        {"SLURM_STEP_ID", "0"},
                                        {"SLURM_STEP_NODELIST", "gpu[07-09],cpu1"},
                                        {"SLURM_JOB_NODELIST", "other[1-4]"},
                                        {"SLURM_JOB_ID", "123456"}});
        const auto o = mpify::DdpOptions::from_environment();
        CHECK(o.node_rank == 1);
        CHECK(o.nodes == 4);
        CHECK(o.addr == "gpu07");
        CHECK(o.port == 20000 + 123456 % 20000);
    }
    {
        LauncherEnvironment e(Variables{{"SLURM_NODEID", "0"},
                                        {"SLURM_NNODES", "2"},
                                        {"SLURM_JOB_NODELIST", "a[3-4]"},
                                        {"SLURM_STEP_ID", "1"},
                                        {"MASTER_PORT", "1234"}});
        const auto o = mpify::DdpOptions::from_environment();
        CHECK(o.addr == "a3");
        CHECK(o.port == 1234);
    }
    {
        LauncherEnvironment e(Variables{{"SLURM_NNODES", "2"}, {"SLURM_JOB_NODELIST", "a[3-4]"}});
        CHECK_THROWS_WITH(mpify::DdpOptions::from_environment(),
                          Contains("SLURM_NNODES is set but SLURM_NODEID is not; start the program with srun"));
    }
    {
        LauncherEnvironment e(Variables{{"SLURM_NODEID", "0"},
                                        {"SLURM_NNODES", "2"},
                                        {"SLURM_NTASKS", "4"},
                                        {"SLURM_STEP_ID", "0"},
                                        {"SLURM_JOB_NODELIST", "a[3-4]"}});
        CHECK_THROWS_WITH(mpify::DdpOptions::from_environment(), Contains("Slurm started 4 tasks on 2 nodes"));
    }
    {
        // What sbatch's script sees on the first node, without srun.
        LauncherEnvironment e(Variables{{"SLURM_NODEID", "0"},
                                        {"SLURM_NNODES", "2"},
                                        {"SLURM_NTASKS", "2"},
                                        {"SLURM_JOB_NODELIST", "n[1-2]"},
                                        {"SLURM_JOB_ID", "2"}});
        CHECK_THROWS_WITH(mpify::DdpOptions::from_environment(),
                          Contains("this is the job's batch script") && Contains("srun --ntasks-per-node=1"));
    }
}

TEST_CASE("without a launcher a program is one machine, and placing is checked", "[launcher]") {
    LauncherEnvironment e(Variables{});
    const auto o = mpify::DdpOptions::from_environment();
    CHECK(o.nodes == 1);
    CHECK(o.node_rank == 0);
    CHECK(o.addr == "127.0.0.1");
    CHECK(o.port == 0);
}
