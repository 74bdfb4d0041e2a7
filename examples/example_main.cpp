#include "example_main.hpp"

#include <mpify/learner/learner.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

using namespace mpify::learner;

namespace mpify_examples {

bool take_flag(int& argc, char** argv, const char* flag) {
    bool found = false;
    int kept = 1;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], flag) == 0) found = true;
        else argv[kept++] = argv[i];
    }
    argc = kept;
    argv[argc] = nullptr;
    return found;
}

CommandLine parse_command_line(int argc, char** argv, const char* program, const char* own_options) {
    CommandLine cli;
    for (int i = 1; i < argc; ++i) {
        const bool has_value = i + 1 < argc;
        if (std::strcmp(argv[i], "--procs") == 0 && has_value && std::atoi(argv[i + 1]) >= 1) {
            cli.procs = std::atoi(argv[++i]);
        } else if (std::strcmp(argv[i], "--out") == 0 && has_value) {
            cli.out_dir = argv[++i];
        } else if (std::strcmp(argv[i], "--in-ddp-only") == 0) {
            cli.alone_too = false;
        } else if (std::strcmp(argv[i], "--nodes-from-environment") == 0) {
            cli.across_machines = true;
        } else {
            // What was wrong first, then how it is used.
            if (std::strcmp(argv[i], "--procs") == 0)
                std::fprintf(stderr, "%s: --procs needs a whole number of processes, 1 or more (got %s)\n", program,
                             has_value ? argv[i + 1] : "nothing");
            else if (std::strcmp(argv[i], "--out") == 0) std::fprintf(stderr, "%s: --out needs a folder\n", program);
            else std::fprintf(stderr, "%s: unknown option %s\n", program, argv[i]);
            std::fprintf(stderr,
                         "usage: %s [--procs N] [--out DIR] [--in-ddp-only] [--nodes-from-environment]\n"
                         "  --procs N  processes of the in_ddp run (per machine; default 2)\n"
                         "  --out DIR  folder for the per-epoch CSV files, made if missing (default .)\n"
                         "  --in-ddp-only  skip the run in this process, train with in_ddp only\n"
                         "  --nodes-from-environment  train once, as one machine of several, placed by\n"
                         "             Slurm, Open MPI or torchrun's variables (see examples/launch/)\n%s",
                         program, own_options);
            std::exit(2);
        }
    }
    // Made now, not found missing when the first epoch's CSV is written a minute later.
    std::error_code error;
    std::filesystem::create_directories(cli.out_dir, error);
    if (error || ::access(cli.out_dir.c_str(), W_OK) != 0) {
        std::fprintf(stderr, "%s: cannot write the results in --out %s: %s\n", program, cli.out_dir.c_str(),
                     error ? error.message().c_str() : std::strerror(errno));
        std::exit(2);
    }
    return cli;
}

void save_pictures(const CommandLine& cli, const std::string& name, const History& history,
                   const std::vector<LabeledImage>& batch, const std::vector<LabeledImage>& results) {
    const std::string stem = cli.out_dir + "/" + name;
    std::string saved = stem + "_losses.svg";
    plot_losses(history).save(saved);
    if (!batch.empty()) {
        show_batch(batch).save(stem + "_batch.svg");
        saved += ", " + stem + "_batch.svg";
    }
    if (!results.empty()) {
        show_results(results).save(stem + "_results.svg");
        saved += ", " + stem + "_results.svg";
    }
    std::printf("pictures: %s\n", saved.c_str());
}

int report_this_machine(const History& history, double target) {
    const double accuracy = history.final("accuracy");
    std::printf("accuracy after %zu epochs on %d ranks: %.4f\n", history.epochs.size(), history.world_size, accuracy);
    return accuracy >= target || LearnerOptions::max_batches_from_environment() > 0 ? 0 : 1;
}

int report(const History* alone, const History& together, const std::string& metric, double target, Goal goal) {
    std::vector<std::pair<std::string, const History*>> runs;
    if (alone) runs.emplace_back("1 process", alone);
    runs.emplace_back(std::to_string(together.world_size) + " processes", &together);
    const bool budgeted = LearnerOptions::max_batches_from_environment() > 0;
    bool reached = true;
    std::printf("\n%-14s %12s %10s%s\n", "", metric.c_str(), "time (s)", alone ? "  speed-up" : "");
    for (const auto& [name, history] : runs) {
        const double value = history->final(metric);
        reached = reached && (goal == Goal::at_least ? value >= target : value <= target);
        std::printf("%-14s %12.4f %10.1f", name.c_str(), value, history->seconds);
        if (alone) std::printf(" %8.2fx", alone->seconds / history->seconds);
        std::printf("\n");
    }
    const char* relation = goal == Goal::at_least ? ">=" : "<=";
    if (budgeted) {
        std::printf("(batches capped by MPIFY_LEARNER_MAX_BATCHES: the target %s %.4f does not apply)\n", relation,
                    target);
        return 0;
    }
    std::printf("target: %s %s %.4f in every run: %s\n", metric.c_str(), relation, target,
                reached ? "reached" : "MISSED");
    return reached ? 0 : 1;
}

}  // namespace mpify_examples
