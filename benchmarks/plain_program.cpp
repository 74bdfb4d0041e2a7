// A program that ranches a plain function and nothing else: no tensor, no DDP. Linked
// with mpify::core only, it loads no LibTorch, in the caller or in its workers.
//
//   mpify_bench_plain_program [n] [exec|template]   one ranch(n, noop), 4 and exec by default
//
// Timed from outside as a whole process (e.g. /usr/bin/time, or hyperfine-style runs):
// what a command-line tool built on mpify pays to run n-1 exec'd workers once.
#include <mpify/mpify.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int noop() { return mpify::local_rank(); }
MPIFY_REGISTER(noop);

int main(int argc, char** argv) {
    mpify::init(argc, argv);
    const int n = argc > 1 ? std::atoi(argv[1]) : 4;
    mpify::Options options;
    options.spawner = argc > 2 && std::strcmp(argv[2], "template") == 0 ? mpify::Spawner::warm_template
                                                                        : mpify::Spawner::exec;
    const std::vector<int> ranks = mpify::ranch(options, n, noop);
    return static_cast<int>(ranks.size()) == n ? 0 : 1;
}
