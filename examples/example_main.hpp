#pragma once
// What the examples' command-line programs share: their options, and the closing
// table that puts the single-process and the in_ddp run side by side.
#include <mpify/learner/history.hpp>
#include <mpify/learner/pictures.hpp>

#include <mpify/ddp_guard.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mpify_examples {

/// The programs' options: --procs N (processes for the in_ddp run, default 2),
/// --out DIR (where the per-epoch CSVs go, default the current folder),
/// --in-ddp-only (skip the single-process run: the test suite's check that the example
/// still reaches its target, in half the time), and --nodes-from-environment (one
/// machine of several, placed by its launcher: see examples/launch/).
struct CommandLine {
    int procs = 2;
    std::string out_dir = ".";
    bool alone_too = true;
    bool across_machines = false;
};

/// Parses argv; prints usage naming `program` (and `own_options`, lines that describe
/// the program's own flags) and exits 2 on anything else.
CommandLine parse_command_line(int argc, char** argv, const char* program, const char* own_options = "");

/// Removes `flag` from argv, wherever it is: a program's own option, taken before
/// parse_command_line sees the rest. Returns whether it was there.
bool take_flag(int& argc, char** argv, const char* flag);

/// Trains with `train` once in this process (unless --in-ddp-only), then with
/// mpify::in_ddp on cli.procs processes. Each run writes its per-epoch CSV into
/// cli.out_dir, named <name>_1_process.csv and <name>_<procs>_processes.csv (Config has a
/// `csv` field).
template <class Config, class Result>
std::pair<std::optional<Result>, Result> train_alone_then_together(const CommandLine& cli, const std::string& name,
                                                                   Result (*train)(Config), Config config) {
    std::optional<Result> alone;
    if (cli.alone_too) {
        config.csv = cli.out_dir + "/" + name + "_1_process.csv";
        alone = train(config);
    }
    config.csv = cli.out_dir + "/" + name + "_" + std::to_string(cli.procs) + "_processes.csv";
    Result together = mpify::in_ddp(cli.procs, train, config);
    return {std::move(alone), std::move(together)};
}

/// One machine's part of a training across machines: in_ddp on cli.procs local ranks,
/// placed by mpify::DdpOptions::from_environment(). Returns this machine's first rank's
/// result; its CSV is <name>_node<k>.csv in cli.out_dir.
template <class Config, class Result>
Result train_on_this_machine(const CommandLine& cli, const std::string& name, Result (*train)(Config), Config config) {
    const mpify::DdpOptions options = mpify::DdpOptions::from_environment();
    config.csv = cli.out_dir + "/" + name + "_node" + std::to_string(options.node_rank) + ".csv";
    return mpify::in_ddp(options, cli.procs, train, config);
}

/// Prints a machine's part of a training across machines ("accuracy after E epochs on W
/// ranks: A"). Returns the exit code: 0 when `accuracy` reached `target`, or when
/// MPIFY_LEARNER_MAX_BATCHES cut the run short; else 1.
int report_this_machine(const mpify::learner::History& history, double target);

/// Saves a run's pictures into cli.out_dir: <name>_losses.svg, and when there are
/// images <name>_batch.svg and <name>_results.svg; prints where they went.
void save_pictures(const CommandLine& cli, const std::string& name, const mpify::learner::History& history,
                   const std::vector<mpify::learner::LabeledImage>& batch = {},
                   const std::vector<mpify::learner::LabeledImage>& results = {});

/// Whether a metric must end above or below its target.
enum class Goal { at_least, at_most };

/// Prints both runs' final `metric`, their times and the speed-up (the in_ddp run alone
/// when `alone` is null), and whether the target was reached. Returns the program's exit
/// code: 0 when every run reached `target`, or when MPIFY_LEARNER_MAX_BATCHES cut the
/// runs short (no target applies); else 1.
int report(const mpify::learner::History* alone, const mpify::learner::History& together, const std::string& metric,
           double target, Goal goal);

}  // namespace mpify_examples
