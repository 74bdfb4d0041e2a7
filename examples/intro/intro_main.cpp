// intro: the CNN on Fashion-MNIST, trained in one process and then with
// mpify::in_ddp on N processes (default 2); prints both runs side by side.
//
//   ./build/bin/intro [--procs N] [--out DIR]     (per-epoch CSVs go to DIR, default .)
//   srun --ntasks-per-node=1 ./build/bin/intro --nodes-from-environment   (examples/launch/)
//   ./build/bin/intro --compare-bfloat16   (the in_ddp run in float32, then in bfloat16)
#include "intro.hpp"

#include "example_main.hpp"

#include <mpify/learner/learner.hpp>

#include <mpify/mpify.hpp>

#include <cmath>
#include <cstdio>

using namespace mpify::learner;
using namespace mpify_examples;

namespace {

/// --compare-bfloat16: the in_ddp run in float32, then the same in bfloat16 autocast;
/// prints both, and "precision check: passed" when both reach the target and bfloat16's
/// accuracy is within intro::bfloat16_accuracy_tolerance of float32's. Returns the exit code.
int compare_precisions(const CommandLine& cli) {
    intro::Config config;
    config.csv = cli.out_dir + "/intro_float32.csv";
    const intro::Result float32 = mpify::in_ddp(cli.procs, intro::train, config);
    config.bfloat16 = true;
    config.csv = cli.out_dir + "/intro_bfloat16.csv";
    const intro::Result bfloat16 = mpify::in_ddp(cli.procs, intro::train, config);

    const double float32_accuracy = float32.history.final("accuracy");
    const double bfloat16_accuracy = bfloat16.history.final("accuracy");
    std::printf("\n%d processes %12s %10s\n", cli.procs, "accuracy", "time (s)");
    std::printf("%-11s %12.4f %10.1f\n", "float32", float32_accuracy, float32.history.seconds);
    std::printf("%-11s %12.4f %10.1f\n", "bfloat16", bfloat16_accuracy, bfloat16.history.seconds);
    if (LearnerOptions::max_batches_from_environment() > 0) {
        std::printf("(batches capped by MPIFY_LEARNER_MAX_BATCHES: no check applies)\n");
        return 0;
    }
    const bool reached = float32_accuracy >= intro::target_accuracy && bfloat16_accuracy >= intro::target_accuracy;
    const bool close = std::abs(bfloat16_accuracy - float32_accuracy) <= intro::bfloat16_accuracy_tolerance;
    std::printf("target accuracy >= %.4f: %s; bfloat16 within %.3f of float32: %s\n", intro::target_accuracy,
                reached ? "reached" : "MISSED", intro::bfloat16_accuracy_tolerance, close ? "yes" : "NO");
    if (!reached || !close) return 1;
    std::printf("precision check: passed\n");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const bool compare_bfloat16 = take_flag(argc, argv, "--compare-bfloat16");
    const CommandLine cli =
        parse_command_line(argc, argv, "intro",
                           "  --compare-bfloat16  train with in_ddp in float32, then in bfloat16 (CPU autocast),\n"
                           "             and check that both reach the target, within 0.005 of each other\n");
    if (compare_bfloat16) return compare_precisions(cli);
    if (cli.across_machines) {
        const intro::Result result = train_on_this_machine(cli, "intro", intro::train, intro::Config{});
        return report_this_machine(result.history, intro::target_accuracy);
    }

    const auto [alone, together] = train_alone_then_together(cli, "intro", intro::train, intro::Config{});
    save_pictures(cli, "intro", together.history, together.batch, together.results);

    std::printf("\nFashion-MNIST test set, first images:\n");
    for (const intro::Prediction& p : together.predictions)
        std::printf("  %-12s predicted %-12s (%.2f)\n", intro::class_names.at(p.label).c_str(),
                    intro::class_names.at(p.predicted).c_str(), p.confidence);
    return report(alone ? &alone->history : nullptr, together.history, "accuracy", intro::target_accuracy,
                  Goal::at_least);
}
