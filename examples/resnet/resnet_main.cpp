// resnet: a small ResNet with (Sync)BatchNorm on Fashion-MNIST, its rate from lr_find,
// trained in one process and then with mpify::in_ddp on N processes (default 2).
//
//   ./build/bin/resnet [--procs N] [--out DIR]     (CSVs and pictures go to DIR, default .)
#include "resnet.hpp"

#include "example_main.hpp"

#include <mpify/learner/learner.hpp>

#include <mpify/mpify.hpp>

#include <algorithm>
#include <cstdio>

using namespace mpify::learner;
using namespace mpify_examples;

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const CommandLine cli = parse_command_line(argc, argv, "resnet");
    if (cli.across_machines) {
        const resnet::Result result = train_on_this_machine(cli, "resnet", resnet::train, resnet::Config{});
        return report_this_machine(result.history, resnet::target_accuracy);
    }

    const auto [alone, together] = train_alone_then_together(cli, "resnet", resnet::train, resnet::Config{});
    save_pictures(cli, "resnet", together.history);
    const std::string stem = cli.out_dir + "/resnet";
    plot_lr_find(together.finder).save(stem + "_lr_find.svg");
    plot_confusion_matrix(together.confusion).save(stem + "_confusion.svg");
    plot_top_losses(together.top_losses, 3).save(stem + "_top_losses.svg");
    std::printf("pictures: %s_lr_find.svg, %s_confusion.svg, %s_top_losses.svg\n", stem.c_str(), stem.c_str(),
                stem.c_str());

    auto print_finder = [](const char* run, const resnet::Result& r) {
        std::printf("lr_find %-12s valley %.3g, minimum %.3g (trained at %.3g), %zu steps in %.1f s; training %.1f s\n",
                    run, r.finder.suggested_lr, r.finder.minimum_lr, r.max_lr, r.finder.lrs.size(), r.finder_seconds,
                    r.history.seconds);
    };
    std::printf("\n");
    if (alone) print_finder("alone:", *alone);
    print_finder("with in_ddp:", together);
    std::printf("in_ddp: %lld SyncBatchNorm2d layers; most confused on the test set:\n",
                static_cast<long long>(together.sync_norms));
    const std::vector<Confusion> confused = together.confusion.most_confused(1);
    for (std::size_t i = 0; i < std::min<std::size_t>(5, confused.size()); ++i)
        std::printf("  %-12s taken for %-12s %lld times\n", confused[i].actual.c_str(), confused[i].predicted.c_str(),
                    static_cast<long long>(confused[i].count));
    return report(alone ? &alone->history : nullptr, together.history, "accuracy", resnet::target_accuracy,
                  Goal::at_least);
}
