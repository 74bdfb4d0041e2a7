// intro: the CNN on Fashion-MNIST, trained in one process and then with
// mpify::in_ddp on N processes (default 2); prints both runs side by side.
//
//   ./build/bin/intro [--procs N] [--out DIR]     (per-epoch CSVs go to DIR, default .)
//   srun --ntasks-per-node=1 ./build/bin/intro --nodes-from-environment   (examples/launch/)
#include "intro.hpp"

#include "example_main.hpp"

#include <learner/learner.hpp>

#include <mpify/mpify.hpp>

#include <cstdio>

using namespace mpify_examples;

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const CommandLine cli = parse_command_line(argc, argv, "intro");
    if (cli.across_machines) {
        const intro::Result result = train_on_this_machine(cli, "intro", intro::train, intro::Config{});
        const double accuracy = result.history.final("accuracy");
        std::printf("accuracy after %zu epochs on %d ranks: %.4f\n", result.history.epochs.size(),
                    result.history.world_size, accuracy);
        return accuracy >= intro::target_accuracy || LearnerOptions::max_batches_from_environment() > 0 ? 0 : 1;
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
