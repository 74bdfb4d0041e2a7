// collab: a dot-product recommender fitted to ratings generated from hidden factors;
// trained in one process, then with mpify::in_ddp on N processes (default 2).
//
//   ./build/bin/collab [--procs N] [--out DIR]
#include "collab.hpp"

#include "example_main.hpp"

#include <mpify/mpify.hpp>

#include <cstdio>

using namespace mpify::learner;
using namespace mpify_examples;

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const CommandLine cli = parse_command_line(argc, argv, "collab");

    const auto [alone, together] = train_alone_then_together(cli, "collab", collab::train, collab::Config{});
    save_pictures(cli, "collab", together.history);

    std::printf("\nheld-out ratings, first ones:\n");
    for (const collab::Prediction& p : together.predictions)
        std::printf("  user %4lld item %4lld  rating %5.2f  predicted %5.2f\n", static_cast<long long>(p.user),
                    static_cast<long long>(p.item), p.rating, p.predicted);
    std::printf("\nnoise floor (RMSE of the truth itself): %.4f; always predicting the mean: %.4f\n",
                together.noise_floor, together.mean_baseline);
    return report(alone ? &alone->history : nullptr, together.history, "rmse",
                  collab::target_rmse_over_floor * together.noise_floor, Goal::at_most);
}
