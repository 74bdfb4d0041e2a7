// intro: the CNN on Fashion-MNIST, trained in one process and then with
// mpify::in_ddp on N processes (default 2); prints both runs side by side.
//
//   ./build/bin/intro [--procs N] [--out DIR]     (per-epoch CSVs go to DIR, default .)
#include "intro.hpp"

#include "example_main.hpp"

#include <mpify/mpify.hpp>

#include <cstdio>

using namespace mpify_examples;

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const CommandLine cli = parse_command_line(argc, argv, "intro");

    const auto [alone, together] = train_alone_then_together(cli, "intro", intro::train, intro::Config{});
    save_pictures(cli, "intro", together.history, together.batch, together.results);

    std::printf("\nFashion-MNIST test set, first images:\n");
    for (const intro::Prediction& p : together.predictions)
        std::printf("  %-12s predicted %-12s (%.2f)\n", intro::class_names.at(p.label).c_str(),
                    intro::class_names.at(p.predicted).c_str(), p.confidence);
    return report(alone.history, together.history, "accuracy", intro::target_accuracy, Goal::at_least);
}
