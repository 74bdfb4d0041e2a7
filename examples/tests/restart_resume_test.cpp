// Options::restarts and the Learner's checkpoints together: a rank killed mid-fit, the
// call started again, the fit resumed from its last checkpoint, and the run ends as the
// run that was never stopped.
#include <intro/intro.hpp>

#include <mpify/ddp_guard.hpp>
#include <mpify/mpify.hpp>

#include <catch2/catch.hpp>

#include "scratch_folder.hpp"

#include <filesystem>
#include <iostream>
#include <sstream>

using namespace mpify::learner;
using namespace mpify_examples;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

TEST_CASE("a rank killed in epoch 2 of 3: in_ddp restarts, resumes and ends as the run never stopped",
          "[checkpoint][restart]") {
    const mpify_examples::testing::ScratchFolder scratch("mpify_restart_resume", "runs");
    const fs::path& root = scratch.path();
    mpify::Options options;
    options.env["MPIFY_LEARNER_MAX_BATCHES"] = "8";
    intro::Config config;
    config.epochs = 3;
    config.checkpoint_dir = (root / "whole").string();
    const intro::Result whole = mpify::in_ddp(mpify::DdpOptions{}, options, 2, intro::train, config);

    config.checkpoint_dir = (root / "killed").string();
    config.kill_rank = 1;
    config.kill_epoch = 2;
    config.kill_batch = 3;
    options.restarts = 1;
    std::ostringstream err;
    std::streambuf* old_err = std::cerr.rdbuf(err.rdbuf());
    const intro::Result resumed = mpify::in_ddp(mpify::DdpOptions{}, options, 2, intro::train, config);
    std::cerr.rdbuf(old_err);
    CHECK_THAT(err.str(), Contains("mpify: rank 1 was killed by SIGKILL") && Contains("restart 1 of 1 on 2 ranks"));

    REQUIRE(resumed.history.epochs.size() == 3);
    for (std::size_t e = 0; e < 3; ++e) {
        INFO("epoch " << e + 1);
        CHECK(resumed.history.epochs[e].train_loss == Approx(whole.history.epochs[e].train_loss).margin(1e-6));
        CHECK(resumed.history.epochs[e].valid_loss == Approx(whole.history.epochs[e].valid_loss).margin(1e-6));
        CHECK(resumed.history.epochs[e].metrics.at(0) == Approx(whole.history.epochs[e].metrics.at(0)).margin(1e-6));
    }
    REQUIRE(resumed.predictions.size() == whole.predictions.size());
    for (std::size_t i = 0; i < whole.predictions.size(); ++i)
        CHECK(resumed.predictions[i].confidence == Approx(whole.predictions[i].confidence).margin(1e-6));
}
