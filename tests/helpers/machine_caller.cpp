// One machine's caller for the several-machines tests: its place in the group comes from
// the launcher's environment (mpify::DdpOptions::from_environment), as in a real job.
//   mpify_test_machine_caller MODE N [TIMEOUT_MS]
//   MODE: allreduce   prints "allreduce = <sum of ranks>" and torchrun's variables
//         train       5 DDP steps; prints the largest difference from one process
//         until-stopped  all-reduces until another machine fails (prints "training")
// Errors go to stdout as "error: ..." (with nested causes), exit status 1.
#include "ddp_functions.hpp"

#include <ATen/ATen.h>

#include <cstdlib>
#include <iostream>
#include <string>

namespace {

void print_error(const std::exception& e, int depth = 0) {
    std::cout << (depth == 0 ? "error: " : "  because: ") << e.what() << std::endl;
    try {
        std::rethrow_if_nested(e);
    } catch (const std::exception& nested) {
        print_error(nested, depth + 1);
    } catch (...) {
    }
}

}  // namespace

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    if (argc < 3) {
        std::cerr << "usage: mpify_test_machine_caller allreduce|train|until-stopped N [TIMEOUT_MS]\n";
        return 2;
    }
    const std::string mode = argv[1];
    const int n = std::atoi(argv[2]);
    try {
        mpify::DdpOptions options = mpify::DdpOptions::from_environment();
        options.timeout = std::chrono::milliseconds(argc > 3 ? std::atoi(argv[3]) : 60000);
        if (mode == "allreduce") {
            // Each result before its line is begun: a call flushes the caller's stdout
            // when it starts, and mpirun mixes the two callers' partial lines.
            const auto sum = mpify::in_ddp(options, n, ddp_test::allreduce_rank);
            std::cout << "allreduce = " << sum << std::endl;
            const std::string variables = mpify::in_ddp(options, n, ddp_test::torchrun_variables);
            std::cout << "variables: " << variables << std::endl;
        } else if (mode == "train") {
            ddp_test::TrainSpec spec;
            spec.steps = 5;
            const auto ddp = mpify::in_ddp(options, n, ddp_test::train_mlp, spec).parameters;
            const auto single = ddp_test::train_mlp_single(spec);
            double largest = 0;
            for (std::size_t i = 0; i < ddp.size(); ++i)
                largest = std::max(largest, (ddp[i] - single.at(i)).abs().max().item<double>());
            std::cout << "parameters: " << ddp.size() << " tensors, largest difference = " << largest << std::endl;
        } else if (mode == "until-stopped") {
            mpify::in_ddp(options, n, ddp_test::allreduce_until_stopped);
            std::cout << "stopped without an error" << std::endl;
        } else {
            std::cerr << "unknown mode " << mode << "\n";
            return 2;
        }
    } catch (const std::exception& e) {
        print_error(e);
        return 1;
    }
    return 0;
}
