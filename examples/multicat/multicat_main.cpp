// multicat: two Fashion-MNIST images side by side, the labels are the classes present;
// trained in one process, then with mpify::in_ddp on N processes (default 2).
//
//   ./build/bin/multicat [--procs N] [--out DIR]
#include "multicat.hpp"

#include "example_main.hpp"
#include "intro/intro.hpp"

#include <mpify/mpify.hpp>

#include <cstdio>

using namespace mpify::learner;
using namespace mpify_examples;

namespace {

std::string names(const std::vector<int>& labels) {
    std::string text;
    for (int label : labels) text += (text.empty() ? "" : " + ") + intro::class_names.at(label);
    return text.empty() ? "(nothing)" : text;
}

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const CommandLine cli = parse_command_line(argc, argv, "multicat");

    const auto [alone, together] = train_alone_then_together(cli, "multicat", multicat::train, multicat::Config{});
    save_pictures(cli, "multicat", together.history, together.batch, together.results);

    std::printf("\ntest pairs, first ones:\n");
    for (const multicat::Prediction& p : together.predictions)
        std::printf("  %-28s predicted %s\n", names(p.labels).c_str(), names(p.predicted).c_str());
    return report(alone ? &alone->history : nullptr, together.history, "accuracy_multi",
                  multicat::target_accuracy_multi, Goal::at_least);
}
