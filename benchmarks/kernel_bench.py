#!/usr/bin/env python3
"""mpify-kernel's numbers, measured in one run (not a test: nothing is asserted).

  /usr/bin/python3 benchmarks/kernel_bench.py --build-dir build [--rounds 20]

- start: from starting the kernel process to the first cell's output (median of 5);
- ranch(4, noop) from a kernel cell, after a first call, against the same call from a
  compiled program (mpify_bench_compiled_ranch), both timed in-process (median);
- a cell printing 10 000 lines: all delivered, in order, and how fast (lines/s between
  the cell's start and its last output message);
- what the pre-check of each cell in a forked child costs: the same cells in a kernel
  with it and in one without (MPIFY_KERNEL_PRECHECK=off), side by side: a small cell, a
  small cell ending in a value, a cell that includes <torch/torch.h> and uses it, and a
  small cell once LibTorch is in the session (the fork of a large process);
- a training loop in a cell (a small CNN on random data, one thread) against the same loop
  as the caller's rank of ranch(1, ...), interleaved in one kernel, and the same in a
  kernel with MPIFY_TENSOR_MEMORY_CACHE=0 (--only-training: this part alone).
"""
import argparse
import os
import queue
import statistics
import subprocess
import time
from pathlib import Path

from jupyter_client.manager import KernelManager


def run_cell(client, code, timeout=300):
    msg_id = client.execute(code)
    messages, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            message = client.get_iopub_msg(timeout=deadline - time.monotonic())
        except queue.Empty:
            break
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append((time.monotonic(), message["msg_type"], message["content"]))
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            return messages
    raise RuntimeError("the cell did not finish: {}".format(messages))


def text_of(messages):
    return "".join(c["text"] for _, t, c in messages if t == "stream")


def start_kernel(env=None):
    manager = KernelManager(kernel_name="mpify-cpp17")
    started = time.monotonic()
    manager.start_kernel(env=env) if env else manager.start_kernel()
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    messages = run_cell(client, '#include <cstdio>\nstd::printf("ready\\n");')
    first = next(at for at, t, c in messages if t == "stream" and "ready" in c["text"])
    return manager, client, first - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--only-precheck", action="store_true", help="only the pre-check's costs")
    parser.add_argument("--only-training", action="store_true", help="only the training loop in a cell")
    args = parser.parse_args()
    build = args.build_dir.resolve()
    os.environ["JUPYTER_PATH"] = str(build / "share" / "jupyter")
    include = Path(__file__).resolve().parent.parent / "include"
    if args.only_precheck:
        precheck_costs(args.rounds)
        return
    if args.only_training:
        training_in_cells(build, include)
        return

    starts = []
    for _ in range(5):
        manager, client, seconds = start_kernel()
        starts.append(seconds)
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    print("kernel start to first cell output: median {:.3f} s (runs: {})".format(
        statistics.median(starts), ", ".join("{:.3f}".format(s) for s in starts)))

    manager, client, _ = start_kernel()
    try:
        setup = ('#pragma cling add_include_path("{}")\n#pragma cling add_library_path("{}")\n'
                 '#pragma cling load("libmpify_bench_functions")\n'.format(include, build / "bin"))
        run_cell(client, setup)
        cell = ('#include <mpify/mpify.hpp>\n#include <algorithm>\n#include <chrono>\n#include <cstdio>\n#include <vector>\n'
                'namespace mpify_bench { void noop(); }\n'
                'mpify::ranch(4, mpify_bench::noop);\n'
                'std::vector<double> seconds;\n'
                'for (int i = 0; i < %d; ++i) {\n'
                '    const auto start = std::chrono::steady_clock::now();\n'
                '    mpify::ranch(4, mpify_bench::noop);\n'
                '    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());\n'
                '}\n'
                'std::sort(seconds.begin(), seconds.end());\n'
                'std::printf("median %%.6f\\n", seconds[seconds.size() / 2]);' % args.rounds)
        in_kernel = float(text_of(run_cell(client, cell)).split("median")[1])
        compiled_output = subprocess.run([str(build / "bin" / "mpify_bench_compiled_ranch"), str(args.rounds)],
                                         check=True, capture_output=True, text=True).stdout
        compiled = float(compiled_output.split("median")[1])
        print("ranch(4, noop), median of {}: kernel cell {:.4f} s, compiled program {:.4f} s, ratio {:.2f}".format(
            args.rounds, in_kernel, compiled, in_kernel / compiled))

        lines = 10000
        messages = run_cell(client, '#include <cstdio>\nfor (int i = 0; i < %d; ++i) std::printf("line %%d\\n", i);'
                            % lines)
        received = text_of(messages).splitlines()
        in_order = received == ["line {}".format(i) for i in range(lines)]
        busy = next(at for at, t, c in messages if t == "execute_input")
        last = max(at for at, t, c in messages if t == "stream")
        print("{} lines printed: {} received, {}, in {} messages, {:.0f} lines/s".format(
            lines, len(received), "in order" if in_order else "NOT IN ORDER",
            sum(1 for _, t, _ in messages if t == "stream"), lines / (last - busy)))
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    precheck_costs(args.rounds)
    training_in_cells(build, include)


# A small CNN trained on random data, one thread: samples per second of `steps` steps
# after 3 untimed ones. Defined in a cell, so that the same code runs in the cell and as
# the caller's rank of ranch(1, ...).
TRAINING_CELL = r"""
#pragma cling add_include_path("{include}")
#pragma cling add_library_path("{lib}")
#pragma cling load("libmpify")
#pragma cling load("libmpify_torch")
#pragma cling load("libboost_serialization")
#include <mpify/mpify.hpp>
#include <torch/torch.h>
#include <chrono>
#include <cstdio>
struct BenchCnn : torch::nn::Module {{
    torch::nn::Conv2d c1{{nullptr}}, c2{{nullptr}};
    torch::nn::Linear fc{{nullptr}};
    BenchCnn() {{
        c1 = register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)));
        c2 = register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)));
        fc = register_module("fc", torch::nn::Linear(32 * 7 * 7, 10));
    }}
    at::Tensor forward(at::Tensor x) {{
        x = torch::max_pool2d(torch::relu(c1(x)), 2);
        x = torch::max_pool2d(torch::relu(c2(x)), 2);
        return fc(x.flatten(1));
    }}
}};
double bench_train(int steps) {{
    torch::set_num_threads(1);
    torch::manual_seed(0);
    auto model = std::make_shared<BenchCnn>();
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    const int batch = 128;
    const at::Tensor x = torch::randn({{batch, 1, 28, 28}}), y = torch::randint(0, 10, {{batch}});
    auto start = std::chrono::steady_clock::now();
    for (int step = 0; step < steps + 3; ++step) {{
        if (step == 3) start = std::chrono::steady_clock::now();
        optimizer.zero_grad();
        torch::nn::functional::cross_entropy(model->forward(x), y).backward();
        optimizer.step();
    }}
    return steps * batch / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}}
MPIFY_REGISTER(bench_train);
"""


def training_in_cells(build, include, steps=40, rounds=3):
    """The loop in a cell against the caller's rank of ranch(1), interleaved, best of `rounds`;
    then the same in a kernel without the tensor memory cache."""
    for label, env in (("cache on (default)", None),
                       ("MPIFY_TENSOR_MEMORY_CACHE=0", dict(os.environ, MPIFY_TENSOR_MEMORY_CACHE="0"))):
        manager, client, _ = start_kernel(env)
        try:
            messages = run_cell(client, TRAINING_CELL.format(include=include, lib=build / "bin"))
            errors = [c for _, t, c in messages if t == "error"]
            if errors:
                raise RuntimeError("the training cell failed: {}".format(errors))
            cell, rank = [], []
            for _ in range(rounds):
                cell.append(float(text_of(run_cell(client, 'std::printf("%f\\n", bench_train({}));'.format(steps)))))
                rank.append(float(text_of(run_cell(
                    client, 'std::printf("%f\\n", mpify::ranch(1, bench_train, {}).at(0));'.format(steps)))))
            print("{}: training loop in a cell {:.0f} samples/s, as the caller's rank of ranch(1) {:.0f}, "
                  "ratio {:.2f} (best of {}; cell runs {}, rank runs {})".format(
                      label, max(cell), max(rank), max(cell) / max(rank), rounds,
                      ", ".join("{:.0f}".format(v) for v in cell), ", ".join("{:.0f}".format(v) for v in rank)))
        finally:
            client.stop_channels()
            manager.shutdown_kernel(now=True)


def cell_seconds(client, code):
    """From the cell's execute_input to its idle status."""
    messages = run_cell(client, code)
    errors = [c for _, t, c in messages if t == "error"]
    if errors:
        raise RuntimeError("the cell failed: {}".format(errors))
    busy = next(at for at, t, c in messages if t == "execute_input")
    return messages[-1][0] - busy


def precheck_costs(rounds):
    """The same cells, alternately in a kernel with the pre-check and in one without."""
    kernels = {}
    for name, env in (("with", None), ("without", dict(os.environ, MPIFY_KERNEL_PRECHECK="off"))):
        manager, client, _ = start_kernel(env)
        kernels[name] = (manager, client)
    try:
        def compare(label, make_cell, times):
            seconds = {"with": [], "without": []}
            for i in range(times):
                for name in ("with", "without"):
                    seconds[name].append(cell_seconds(kernels[name][1], make_cell(i)))
            with_, without = statistics.median(seconds["with"]), statistics.median(seconds["without"])
            print("{}: {:.3f} s with the pre-check, {:.3f} s without, ratio {:.2f} (median of {})".format(
                label, with_, without, with_ / without, times))

        compare("small cell", lambda i: "int small_{} = {};".format(i, i), rounds)
        compare("small cell with a value", lambda i: "small_{} + 1".format(i), rounds)
        compare("cell with #include <torch/torch.h>",
                lambda i: "#pragma cling load(\"libtorch_cpu\")\n#pragma cling load(\"libc10\")\n"
                "#include <torch/torch.h>\nauto ones = torch::ones({2, 2});\nones.sum().item<float>()", 1)
        compare("small cell, LibTorch in the session", lambda i: "int after_torch_{} = {};".format(i, i), rounds)
    finally:
        for manager, client in kernels.values():
            client.stop_channels()
            manager.shutdown_kernel(now=True)


if __name__ == "__main__":
    main()
